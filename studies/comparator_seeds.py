"""How far a comparator trained by SGD moves with its own seed: the train stage run once per seed
(``comparators.<section>.seed``) with the benchmark's estimators narrowed to the given ones, each
seed's results scored by the report code, side by side: mean Pearson per seed, the range and
standard deviation over seeds, and each seed against the first, paired over the same bootstrap
resamples of the agents.

    .venv/bin/dvc repro sample@see2019     # the store, rollouts and target actions, if not there yet
    .venv/bin/python studies/comparator_seeds.py see2019 --section dynaeval --seeds 0 1 2 \\
        --estimator dynaeval-rollouts --estimator dynaeval-replies --tag dynaeval_seeds_see2019

Each seed runs in ``data/work/comparator_seeds/<benchmark>/<section>/s<seed>/`` with the benchmark's
store, rollouts, targets and truth linked in; its results are kept there per (estimator, agent), so
a rerun resumes. Output: studies/results/<tag>.md and .json.
"""

from __future__ import annotations

import argparse
import copy
import shlex
import statistics
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "studies" / "results"
INPUTS = ("store", "rollouts", "targets", "truth.parquet")


def benchmark_inputs(params: dict, benchmark: str) -> Path:
    """The benchmark's data folder, once its store, rollouts, targets and truth are all there."""
    data = REPO / params.get("pipeline", {}).get("data_dir", "data") / benchmark
    for name in INPUTS:
        if not (data / name).exists():
            sys.exit(f"{data / name}: missing; run `dvc repro sample@{benchmark}` first")
    return data


def seed_params(params: dict, benchmark: str, data: Path, section: str, seed: int, estimators: list[str], workdir: Path) -> Path:
    """params.yaml for one seed: the section's seed set, the benchmark alone with only the given
    estimators, its data folder under ``workdir`` with the inputs in ``data`` linked in."""
    p = copy.deepcopy(params)
    p.setdefault("comparators", {}).setdefault(section, {})["seed"] = seed
    p.setdefault("pipeline", {})["data_dir"] = str(workdir)
    p["benchmarks"] = {benchmark: dict(p["benchmarks"][benchmark], estimators=estimators, full_estimators=[])}
    p["checkpoint_benchmarks"] = {}
    p.pop("nightly", None)  # it names other benchmarks
    (workdir / benchmark).mkdir(parents=True, exist_ok=True)
    for name in INPUTS:
        link = workdir / benchmark / name
        if not link.exists():
            link.symlink_to(data.resolve() / name)
    path = workdir / "params.yaml"
    path.write_text(yaml.safe_dump(p, sort_keys=False))
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("benchmark", help="an entry of params.yaml's benchmarks")
    ap.add_argument("--section", required=True, help="the comparators section whose seed is varied, e.g. dynaeval")
    ap.add_argument("--seeds", type=int, nargs="+", required=True)
    ap.add_argument("--estimator", action="append", required=True, help="an estimator name as params.yaml lists it")
    ap.add_argument("--work", type=Path, default=REPO / "data" / "work" / "comparator_seeds")
    ap.add_argument("--params", type=Path, default=REPO / "params.yaml")
    ap.add_argument("--out", type=Path, default=RESULTS, help="where <tag>.md and .json go")
    ap.add_argument("--tag", required=True)
    args = ap.parse_args()

    from enigma.comparators.config import ComparatorsConfig
    from enigma.evaluation.correlation import paired_difference, score_estimator
    from enigma.evaluation.results import read_results
    from enigma.evaluation.truth import read_truth, truth_wide
    from enigma.params import Params
    from provenance import code_version
    from result_files import paired_cell, write_result

    params = yaml.safe_load(args.params.read_text())
    if args.section not in ComparatorsConfig.model_fields or "seed" not in ComparatorsConfig.model_fields[args.section].annotation.model_fields:
        sys.exit(f"--section {args.section!r}: not a seeded section of comparators")
    data = benchmark_inputs(params, args.benchmark)
    truth = truth_wide(read_truth(REPO / Params.load(args.params).benchmark(args.benchmark).truth))

    scores: dict[str, dict[int, object]] = {}
    for seed in args.seeds:
        workdir = args.work / args.benchmark / args.section / f"s{seed}"
        p = seed_params(params, args.benchmark, data, args.section, seed, args.estimator, workdir)
        print(f"seed {seed}: enigma stage train {args.benchmark} --params {p}", flush=True)
        # the enigma command of the interpreter running this script
        subprocess.run([str(Path(sys.executable).with_name("enigma")), "stage", "train", args.benchmark, "--params", str(p),
                        "--no-progress"], cwd=REPO, check=True)
        results = read_results(workdir / args.benchmark / "results")
        for est in sorted(results.estimator.unique()):
            estimates = results[results.estimator == est].pivot(index="agent_id", columns="rating", values="estimate")
            scores.setdefault(est, {})[seed] = score_estimator(f"{est}@seed{seed}", estimates, truth.loc[estimates.index],
                                                              sorted(estimates.columns))

    first = args.seeds[0]
    lines = [f"# How far a comparator moves with its own seed: comparators.{args.section}.seed on {args.benchmark}", "",
             f"`{shlex.join(['.venv/bin/python', 'studies/comparator_seeds.py', *sys.argv[1:]])}` (code: {code_version()})", "",
             "Leave-one-agent-out, mean Pearson over the ratings [95% CI over 1000 bootstrap resamples of the agents, the same "
             f"for every seed]; each seed against seed {first}, paired.", "",
             "| estimator | seed | mean Pearson [95% CI] | reward Pearson | minus seed " + str(first) + " [95% CI] |",
             "|---|---|---|---|---|"]
    out = {}
    for est, by_seed in scores.items():
        means = [s.means["pearson"] for s in by_seed.values()]
        for seed, s in by_seed.items():
            ci = s.mean_ci["pearson"]
            diff = paired_difference(s, by_seed[first], "pearson", 0.95) if seed != first else None
            d = paired_cell(diff)
            lines.append(f"| {est} | {seed} | {s.means['pearson']:.3f} [{ci[0]:.3f}, {ci[1]:.3f}] | "
                         f"{s.per_rating['reward']['pearson']:.3f} | {d} |")
            out.setdefault(est, {})[seed] = {"mean_pearson": s.means["pearson"], "mean_pearson_ci95": ci,
                                            "reward_pearson": s.per_rating["reward"]["pearson"], f"minus_seed{first}": diff}
        sd = statistics.stdev(means) if len(means) > 1 else 0.0
        lines.append(f"| {est} | range over {len(means)} seeds | {min(means):.3f} to {max(means):.3f} (sd {sd:.3f}) | | |")
    write_result(args.tag, lines, {"reproduce": shlex.join(sys.argv), "rows": out}, args.out)


if __name__ == "__main__":
    main()
