"""ENIGMA rows on a benchmark's DEV half only: the tool for a choice, which may read dev results
and nothing else (issue 58). Unlike ``ope_enigma_rows.py``, which estimates and scores every
agent, this estimates only the dev-half agents (``report.split``), so no test-half number is
computed at all.

Every row is params.yaml's ``estimators.enigma.dice`` without its interval
(``interval_resamples: 0``) plus the row's overrides, run leave-one-agent-out on the benchmark's
store and target actions as the train stage runs one agent (``evaluate_one``), the dev agents
shared out over ``--workers`` processes (one torch thread each). Rows are scored against the
truth with the same bootstrap resamples of the agents, so each row's difference against the
first is paired.

    .venv/bin/dvc repro sample@see2019     # the store and target actions, if not there yet
    .venv/bin/python studies/dev_rows.py see2019 --tag dev_rows_see2019 \\
        --row 'default={}' --row 'history={"fqe": {"agreement": false, "ensemble": 3, "linear_members": 1, "history": true}}'

Results per row stay under ``--work/<benchmark>/<row>`` (a rerun reuses them). Output:
studies/results/<tag>.{md,json}.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import shlex
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from result_files import paired_cell, write_result

REPO = Path(__file__).resolve().parents[1]


def row_params(params: Path, overrides: dict[str, Any]) -> dict[str, Any]:
    from bench_params import with_dice
    from enigma.params import load_yaml

    return with_dice(load_yaml(params), {"interval_resamples": 0, **overrides})


def dev_agents(params: "Params", benchmark: str) -> list[str]:  # noqa: F821
    """The benchmark's dev-half agents (``report.split``; empty where ``test_only`` names it)."""
    from enigma.evaluation.split import split_agents
    from enigma.pipeline.store import heldout_agents

    agents, _ = heldout_agents(params.benchmark(benchmark))
    return split_agents(agents, params.report.split, benchmark)["dev"]


def dev_truth(params: "Params", benchmark: str, dev: list[str]) -> "pd.DataFrame":  # noqa: F821
    """The truth of the ``dev`` agents, [agent x rating], the ratings sorted: nothing of the test half."""
    from enigma.evaluation.truth import read_truth, truth_wide

    truth = truth_wide(read_truth(params.benchmark(benchmark).truth)).loc[dev]
    return truth[sorted(truth.columns)]


def run_agents(benchmark: str, params_data: dict[str, Any], agents: list[str], results_dir: str) -> None:
    """In its own process: each of ``agents`` held out in turn, as the train stage runs one (a
    failure is written as the agent's result)."""
    from enigma.estimators import benchmark_estimator
    from enigma.evaluation.loao import evaluate_one
    from enigma.evaluation.results import record_failure
    from enigma.params import Params
    from enigma.pipeline.sample import read_targets
    from enigma.pipeline.train import sources
    from enigma.store.experience import ExperienceStore

    params = Params.from_dict(params_data)
    b = params.benchmark(benchmark)
    store = ExperienceStore.open(b.store)
    est = benchmark_estimator(b, "enigma", params)
    for a in agents:
        try:
            _, reused = evaluate_one(store, est, a, sources(b, read_targets(b, a), None), results_dir)
            print(f"{results_dir}: {a}{' (reused)' if reused else ''}", flush=True)
        except Exception as exc:
            record_failure(results_dir, est, a, store.rating_names, exc)
            print(f"{results_dir}: {a} FAILED {type(exc).__name__}: {str(exc)[:300]}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("benchmark")
    ap.add_argument("--row", action="append", required=True, metavar="NAME=JSON", help="a row's dice overrides; the first is the reference")
    ap.add_argument("--tag", required=True)
    ap.add_argument("--work", type=Path, default=REPO / "data" / "work" / "dev_rows")
    ap.add_argument("--params", type=Path, default=REPO / "params.yaml")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--dev-of", metavar="BENCHMARK", default=None,
                    help="estimate and score only the dev-half agents of this other benchmark (e.g. airline-delay3 "
                         "with --dev-of airline: the same sellers as airline's dev half, none of its test half)")
    args = ap.parse_args()
    if args.benchmark.replace("-", "_") not in args.tag:
        # the tag alone names the result file: two sets run under one tag overwrite each other's
        ap.error(f"--tag {args.tag}: name the set in it (e.g. dev_rows_{args.benchmark.replace('-', '_')}_<study>), "
                 "so that another set's rows under the same study do not overwrite this one's")
    rows = {}
    for spec in args.row:
        name, _, js = spec.partition("=")
        rows[name] = json.loads(js or "{}")

    import torch

    from enigma.evaluation.correlation import paired_difference, score_estimator
    from enigma.evaluation.results import read_results
    from enigma.params import Params
    from enigma.pipeline.train import warm_embeddings
    from enigma.pipeline.workers import init_worker
    from provenance import code_version

    torch.set_num_threads(1)
    base = Params.load(args.params)
    b = base.benchmark(args.benchmark)
    dev = dev_agents(base, args.benchmark)
    if args.dev_of:
        dev = sorted(set(dev) & set(dev_agents(base, args.dev_of)))
    if not dev:
        sys.exit(f"{args.benchmark}: no dev half (report.split.test_only names it): nothing may be chosen on it")
    warm_embeddings(b, base)

    scores, info = {}, {}
    truth = dev_truth(base, args.benchmark, dev)
    ratings = list(truth.columns)
    for name, overrides in rows.items():
        data = row_params(args.params, overrides)
        out = args.work / args.benchmark / name
        out.mkdir(parents=True, exist_ok=True)
        parts = [dev[i :: args.workers] for i in range(args.workers)]
        with ProcessPoolExecutor(args.workers, mp_context=multiprocessing.get_context("spawn"), initializer=init_worker) as pool:
            for f in [pool.submit(run_agents, args.benchmark, data, p, str(out)) for p in parts]:
                f.result()
        part = read_results(out)
        part = part[(part.estimator == "enigma") & part.agent_id.isin(dev)]
        estimates = part.pivot(index="agent_id", columns="rating", values="estimate").loc[dev]
        s = score_estimator(name, estimates, truth, ratings)
        seconds = part.drop_duplicates("agent_id").seconds  # one run per agent, whatever its ratings
        scores[name] = s
        info[name] = {"overrides": overrides, "mean_pearson": s.means["pearson"], "mean_pearson_ci95": s.mean_ci["pearson"],
                      "mean_spearman": s.means["spearman"],
                      "pearson_per_rating": {r: s.per_rating[r]["pearson"] for r in ratings},
                      "mean_spread_ratio": float(sum(s.per_rating[r]["spread_ratio"] for r in ratings) / len(ratings)),
                      "failed_agents": int(part.loc[part.error.notna(), "agent_id"].nunique()),
                      "seconds_per_agent": float(seconds.mean()),
                      "seconds_per_agent_median": float(seconds.median()),
                      "estimates": {a: {r: float(estimates.loc[a, r]) for r in ratings} for a in dev}}
    ref = next(iter(rows))
    diffs = {f"{n} - {ref}": {st: paired_difference(scores[n], scores[ref], st, 0.95) for st in ("pearson", "spearman")}
             for n in rows if n != ref}

    cmd = shlex.join([".venv/bin/python", "studies/dev_rows.py", *sys.argv[1:]])
    code = code_version()
    fmt = lambda x, spec=".3f": "n/a" if x is None or x != x else format(x, spec)  # noqa: E731
    lines = [f"# ENIGMA rows on the dev half of {args.benchmark}", "", f"`{cmd}` (code: {code})", "",
             f"Dev half only ({len(dev)} agents, `report.split`); no test-half agent was estimated. Each row: params.yaml's "
             "ENIGMA without its interval plus the overrides; leave-one-agent-out; 1000 bootstrap resamples of the agents, "
             "the same for every row, so differences are paired.", "",
             "| row | overrides | mean Pearson [95% CI] | mean Spearman | " + " | ".join(ratings) + " | mean spread ratio | s/agent (mean / median) | failed |",
             "|---|---|---|---|" + "---|" * len(ratings) + "---|---|---|"]
    for name, x in info.items():
        ci = x["mean_pearson_ci95"] or (None, None)
        lines.append(f"| {name} | `{json.dumps(x['overrides'])}` | {fmt(x['mean_pearson'])} [{fmt(ci[0])}, {fmt(ci[1])}] | "
                     f"{fmt(x['mean_spearman'])} | " + " | ".join(fmt(x["pearson_per_rating"][r]) for r in ratings)
                     + f" | {fmt(x['mean_spread_ratio'], '.2f')} | {fmt(x['seconds_per_agent'], '.1f')} / {fmt(x['seconds_per_agent_median'], '.1f')} | {x['failed_agents']} |")
    lines += ["", "Paired differences (mean over ratings, bootstrap over agents, 95%):", ""]
    for n, d in diffs.items():
        lines.append(f"- {n}: Pearson {paired_cell(d['pearson'])}, Spearman {paired_cell(d['spearman'])}")
    write_result(args.tag, lines, {"reproduce": cmd, "code": code, "benchmark": args.benchmark, "dev_agents": dev,
                                   "rows": info, "paired": diffs})


if __name__ == "__main__":
    main()
