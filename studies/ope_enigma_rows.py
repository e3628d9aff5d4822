"""ENIGMA settings compared paired on a benchmark: every row is ``estimators.enigma.dice`` of
params.yaml plus the row's overrides, with the benchmark's knowledge base unless the row sets
``"knowledge": null`` (as the train stage gives it), run by leave-one-agent-out on the same store, target
actions and held-out agents as the DVC train stage runs it (``enigma.pipeline.train``), two rows at a
time (one torch thread each). Each row is scored against the truth with the same bootstrap
resamples of the agents, so differences against the first row are paired.

    .venv/bin/dvc repro sample@airline      # the store and target actions, if not there yet
    .venv/bin/python studies/ope_enigma_rows.py airline \\
        --row 'nu1e-2={"alpha_nu": 0.01}' --row 'nu1e-4={"alpha_nu": 1e-4}' --tag ope_alpha_nu_airline

A row named ``NAME@OTHER`` takes its target actions from benchmark OTHER instead: a benchmark
with the same store, agents and truth but other stand-ins (e.g. ``see2019-ownchats``), so that
stand-ins are compared paired, with the same settings:

    .venv/bin/python studies/ope_enigma_rows.py see2019 --tag stand_ins_see2019 \
        --row 'self-play={"interval_resamples": 0}' --row 'own-chats@see2019-ownchats={"interval_resamples": 0}'

A row given ``--row-params NAME=FILE`` starts from that params file instead: the same benchmark with
other sample settings and its own ``pipeline.data_dir`` (its store and truth copied, then
``enigma stage sample <benchmark> --params FILE``), e.g. four target replies per logged state:

    .venv/bin/python studies/ope_enigma_rows.py airline --tag ope_target_samples_airline \
        --row 'n1={"interval_resamples": 0}' --row 'n4={"interval_resamples": 0}' \
        --row-params n4=data/work/nsamples4/params.yaml

Output: studies/results/<tag>.md and .json (per row: mean Pearson / Spearman over the ratings
with 95% intervals, reward Pearson / Spearman, mean spread ratio, runs converged, seconds per
agent as each agent's result recorded them when it was computed; per row after the first: the
paired difference against the first; ``--pair A:B``: row A minus row B as well). Results per row stay under ``--work`` so a rerun reuses
them, with their cost.
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

import yaml

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "studies" / "results"


def _one_row(benchmark: str, params_path: str, results_dir: str, share: tuple[int, int] = (0, 1)) -> float:
    """One row's held-out agents (``share``: every n-th from the i-th) into ``results_dir``; seconds."""
    from enigma.params import Params
    from enigma.pipeline.train import train_estimator

    t0 = time.perf_counter()
    params = Params.load(params_path)
    failures = train_estimator(params.benchmark(benchmark), params, "enigma", results_dir=results_dir, share=share)
    if failures:
        print(f"{params_path}: {failures} agent(s) failed", flush=True)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("benchmark", help="an entry of params.yaml's benchmarks (its store and target actions made: dvc repro sample@<it>)")
    ap.add_argument("--row", action="append", required=True, metavar="NAME[@BENCHMARK]=JSON",
                    help="dice overrides (@BENCHMARK: that benchmark's target actions); the first row is the reference")
    ap.add_argument("--tag", required=True)
    ap.add_argument("--work", type=Path, default=REPO / "data" / "work" / "ope_rows")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--params", type=Path, default=REPO / "params.yaml", help="the params file the rows start from")
    ap.add_argument("--row-params", action="append", default=[], metavar="NAME=FILE",
                    help="row NAME starts from this params file instead of --params: other sample settings with "
                         "their own pipeline.data_dir (same store and truth), e.g. more target replies per state")
    ap.add_argument("--pair", action="append", default=[], metavar="A:B",
                    help="also give row A minus row B, paired (e.g. two rows that differ in one setting)")
    ap.add_argument("--committed", default=None, metavar="GIT_REF",
                    help="also score ENIGMA's estimates in the report summary.json committed at GIT_REF, paired, as row 'committed'")
    args = ap.parse_args()

    import pandas as pd

    from enigma.agents import APPROXIMATION_LABEL
    from enigma.evaluation.correlation import paired_difference, score_estimator
    from enigma.evaluation.results import read_results
    from enigma.evaluation.summary_file import summary_estimates
    from enigma.evaluation.truth import read_truth, truth_wide
    from bench_params import write_row_params
    from provenance import code_version
    from enigma.params import Params
    from enigma.pipeline.train import warm_embeddings
    from enigma.pipeline.workers import init_worker

    base = yaml.safe_load(args.params.read_text())
    params_of = {}
    for spec in args.row_params:
        name, sep, path = spec.partition("=")
        if not sep or not Path(path).is_file():
            sys.exit(f"--row-params {spec!r}: expected NAME=FILE, FILE an existing params file")
        params_of[name] = path
    rows, targets_of = [], {}
    for spec in args.row:
        name, _, overrides = spec.partition("=")
        name, _, other = name.partition("@")
        rows.append((name, json.loads(overrides)))
        targets_of[name] = other or args.benchmark
    unknown = set(params_of) - {name for name, _ in rows}
    if unknown:
        sys.exit(f"--row-params names no row: {sorted(unknown)}")
    # where each row's target actions come from, as the tables name it
    source = {name: targets_of[name] + (f" ({params_of[name]})" if name in params_of else "") for name, _ in rows}
    work = args.work / args.benchmark
    jobs = []
    for name, overrides in rows:
        d = work / (name if targets_of[name] == args.benchmark else f"{name}@{targets_of[name]}")
        row_base = yaml.safe_load(Path(params_of[name]).read_text()) if name in params_of else base
        jobs.append((name, str(write_row_params(d, row_base, overrides)), str(d / "results")))
    # every text into the shared embedding cache once, before the rows' processes read it
    loaded = {path: Params.load(path) for path in {str(args.params), *params_of.values()}}
    params = loaded[str(args.params)]
    b = params.benchmark(args.benchmark)
    truth = truth_wide(read_truth(REPO / b.truth))
    sources = {(other, str(args.params)) for other in targets_of.values()}
    sources |= {(targets_of[name], path) for name, path in params_of.items()}
    for other, path in sorted(sources):
        ob = loaded[path].benchmark(other)
        if not truth_wide(read_truth(REPO / ob.truth)).equals(truth):
            sys.exit(f"row targets from {other} ({path}): its truth differs from {args.benchmark}'s, so the rows would not be paired")
        warm_embeddings(ob, params)
    with ProcessPoolExecutor(args.workers, mp_context=multiprocessing.get_context("spawn"),
                             initializer=init_worker) as pool:
        futures = {name: pool.submit(_one_row, targets_of[name], p, r) for name, p, r in jobs}
        seconds = {name: f.result() for name, f in futures.items()}

    scores, info = {}, {}
    if args.committed:
        import subprocess

        summary = json.loads(subprocess.run(["git", "show", f"{args.committed}:{b.report_dir()}/summary.json"], cwd=REPO,
                                            capture_output=True, text=True, check=True).stdout)
        old = summary_estimates(summary, "enigma")
        s = score_estimator("committed", old, truth.loc[old.index], sorted(old.columns))
        scores["committed"] = s
        info["committed"] = {
            "overrides": f"reports at {args.committed}", "mean_pearson": s.means["pearson"], "mean_pearson_ci95": s.mean_ci["pearson"],
            "mean_spearman": s.means["spearman"], "mean_spearman_ci95": s.mean_ci["spearman"],
            "reward_pearson": s.per_rating["reward"]["pearson"], "reward_spearman": s.per_rating["reward"]["spearman"],
            "mean_spread_ratio": float(pd.Series([s.per_rating[r]["spread_ratio"] for r in s.ratings]).mean()),
            "converged": None, "agents": len(s.agents), "seconds_per_agent": None,
        }
    for name, _, results in jobs:
        part = read_results(results)
        part = part[part.estimator == "enigma"]
        estimates = part.pivot(index="agent_id", columns="rating", values="estimate")
        ratings = sorted(estimates.columns)
        s = score_estimator(name, estimates, truth.loc[estimates.index], ratings)
        scores[name] = s
        diag = [json.loads(d).get("all", {}) for d in part.drop_duplicates("agent_id").diagnostics if isinstance(d, str)]
        info[name] = {
            "overrides": dict(rows)[name],
            "targets": source[name],
            "mean_pearson": s.means["pearson"], "mean_pearson_ci95": s.mean_ci["pearson"],
            "mean_spearman": s.means["spearman"], "mean_spearman_ci95": s.mean_ci["spearman"],
            "reward_pearson": s.per_rating["reward"]["pearson"], "reward_spearman": s.per_rating["reward"]["spearman"],
            "mean_spread_ratio": float(pd.Series([s.per_rating[r]["spread_ratio"] for r in ratings]).mean()),
            "pearson_per_rating": {r: s.per_rating[r]["pearson"] for r in ratings},
            "converged": sum(bool(d.get("converged")) for d in diag), "agents": len(s.agents),
            "failed_agents": int(part.loc[part.error.notna(), "agent_id"].nunique()) if "error" in part else 0,
            # as each agent's result recorded it when computed, so a row reused from an earlier run
            # keeps its own cost; the wall time of this run is kept beside it
            "seconds_per_agent": float(part.drop_duplicates("agent_id").seconds.mean()),
            "wall_seconds_per_agent": seconds[name] / max(part.agent_id.nunique(), 1),  # failed agents took their time too
        }
    ref = rows[0][0]
    pairs = []
    for spec in args.pair:
        a, sep, b_ = spec.partition(":")
        if not sep or a not in scores or b_ not in scores:
            sys.exit(f"--pair {spec!r}: expected A:B, two row names of {sorted(scores)}")
        pairs.append((a, b_))
    against_ref = [(n, ref) for n in scores if n != ref]
    for a, b_ in against_ref + pairs:
        info[a]["minus_" + b_] = {st: paired_difference(scores[a], scores[b_], st, 0.95) for st in ("pearson", "spearman")}
    shown = ([("committed", info["committed"]["overrides"])] if args.committed else []) + rows

    cmd = shlex.join([".venv/bin/python", "studies/ope_enigma_rows.py", *sys.argv[1:]])
    code = code_version()
    lines = [f"# ENIGMA settings on {args.benchmark}, leave-one-agent-out, paired", "", f"`{cmd}` (code: {code})", "",
             f"Rows: params.yaml's `estimators.enigma.dice` plus the overrides; {len(scores[ref].agents)} held-out agents; "
             "1000 bootstrap resamples of the agents (seed 0), the same for every row.", "",
             "| row | target actions of | overrides | mean Pearson [95% CI] | mean Spearman | reward Pearson | reward Spearman | mean spread ratio | converged | s/agent |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    def num(v, spec: str = ".3f") -> str:  # a row whose every agent failed has no scores
        return "n/a" if v is None or v != v else format(v, spec)

    for name, overrides in shown:
        x = info[name]
        ci = x["mean_pearson_ci95"] or (None, None)
        conv = "n/a" if x["converged"] is None else f"{x['converged']}/{x['agents']}"
        if x.get("failed_agents"):
            conv += f" ({x['failed_agents']} failed)"
        lines.append(
            f"| {name} | {x.get('targets', 'n/a')} | `{json.dumps(overrides)}` | {num(x['mean_pearson'])} [{num(ci[0])}, {num(ci[1])}] | "
            f"{num(x['mean_spearman'])} | {num(x['reward_pearson'])} | {num(x['reward_spearman'])} | {num(x['mean_spread_ratio'], '.2f')} | "
            f"{conv} | {num(x['seconds_per_agent'], '.1f')} |"
        )
    notes = {t: params.benchmark(t).config.note for t in sorted(set(targets_of.values()))}
    for name, path in params_of.items():
        # the row's own params file says where its target actions came from, not the benchmark's
        ob, sample = loaded[path].benchmark(targets_of[name]).config, loaded[path].sample
        t = sample.agents.transcripts
        kind = ob.agent_spec.partition(":")[0]
        what = ob.note or APPROXIMATION_LABEL.get(kind, "the agents themselves")
        notes[source[name]] = (f"{what.rstrip('.')}; agent spec `{ob.agent_spec}`; "
                               f"sample.n_samples {sample.n_samples}; transcripts context_turns {t.context_turns}, "
                               f"top_k {t.top_k}, both_sides {t.both_sides}" + (", sources True" if t.sources else ""))
    lines += ["", "Target actions (each benchmark's note):", ""] + [f"- {t}: {n or 'the agents themselves'}" for t, n in notes.items()]
    for title, listed in ((f"Paired differences against `{ref}` (mean over ratings):", against_ref),
                          ("Other pairs (mean over ratings):", pairs)):
        if listed or listed is against_ref:  # the reference's heading stands even alone
            lines += ["", title, ""]
        for a, b_ in listed:
            for st, p in info[a]["minus_" + b_].items():
                if p:
                    lines.append(f"- {a} minus {b_}, mean {st}: {p['difference']:+.3f} [{p['ci95'][0]:+.3f}, {p['ci95'][1]:+.3f}]")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{args.tag}.json").write_text(json.dumps({"reproduce": cmd, "code": code, "rows": info}, indent=1, default=float) + "\n")
    (RESULTS / f"{args.tag}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
