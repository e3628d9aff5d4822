"""Build the lab's dev twin of ``airline-lm`` (``checkpoint_benchmarks.airline-lm-dev`` in
studies/params.yaml: the same model, data mixes and steps, another training seed) through the
user's path, ``enigma stage checkpoint-... --params studies/params.yaml``, and write its report
as a study result: the figures a change meant for learned checkpoints is chosen on, while
``airline-lm`` stays a test.

    .venv/bin/python studies/lm_checkpoints_dev.py

It reads the product's airline benchmark (``dvc repro report@airline`` first). Training, the
sampler and the scores resume where an interrupted run stopped; the truth stage keeps the
checkpoints it finished until all are. ``--write-only`` writes the result files from the built
report again without running a stage.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from studies.provenance import code_version  # noqa: E402
from studies.result_files import RESULTS, write_result  # noqa: E402
STAGES = ["checkpoints", "checkpoint-truth", "checkpoint-scores", "checkpoint-report"]


def value_parts(results: Path, truth: dict[str, dict[str, float]]) -> list[str]:
    """Each ENIGMA row's value and its two parts per rating (``dr``, the reported one; ``q``, the
    fitted Q's alone; ``weighted``, the ratio's alone) against the truth: which part ranks the
    checkpoints, and whether a row without a block ranks them better."""
    from scipy.stats import pearsonr, spearmanr

    lines = ["## ENIGMA's value and its parts, per row", "",
             "| estimator | rating | part | Pearson | Spearman | range |", "|---|---|---|---|---|---|"]
    for folder in sorted(d for d in results.iterdir() if d.name.startswith("enigma")):
        values: dict[str, dict[str, dict]] = {}
        for f in sorted(folder.glob("*.json")):
            for r in json.loads(f.read_text())["rows"]:
                values.setdefault(r["rating"], {})[r["agent_id"]] = json.loads(r["diagnostics"])["all"]["values"][r["rating"]]
        for rating, by_agent in values.items():
            names = sorted(by_agent)
            t = [truth[n][rating] for n in names]
            for part in ("dr", "q", "weighted"):
                v = [by_agent[n][part] for n in names]
                lines.append(f"| {folder.name} | {rating} | {part} | {pearsonr(v, t)[0]:+.3f} | {spearmanr(v, t)[0]:+.3f} | "
                             f"{min(v):.3f} to {max(v):.3f} |")
    return lines + [""]


def estimators_params(params: Path, name: str, estimators: list[str], out_dir: Path = ROOT / "data" / "work") -> Path:
    """A params file beside the results (untracked, under data/work) that is ``params`` with
    ``estimators`` as the checkpoint benchmark's list: a study of a few rows scores those and
    reuses the results the benchmark already has."""
    import yaml

    out = out_dir / f"{name}-estimators.yaml"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(yaml.safe_dump({"extends": str(params.resolve()),
                                   "checkpoint_benchmarks": {name: {"estimators": list(estimators)}}}))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--name", default="airline-lm-dev")
    ap.add_argument("--params", default="studies/params.yaml")
    ap.add_argument("--tag", default="lm_checkpoints_dev")
    ap.add_argument("--write-only", action="store_true", help="the result files from the built report; no stage runs")
    ap.add_argument("--estimators", nargs="+", default=None,
                    help="score these estimators only (a row's study), through a params file that extends --params "
                         "with this list as the benchmark's estimators; the ones already scored are reused")
    args = ap.parse_args()
    reproduce = f".venv/bin/python studies/lm_checkpoints_dev.py --name {args.name} --params {args.params}"
    if args.estimators:
        reproduce += " --estimators " + " ".join(args.estimators)
        args.params = str(estimators_params(ROOT / args.params, args.name, args.estimators))
    enigma = str(Path(sys.executable).with_name("enigma"))
    seconds = {}
    for stage in [] if args.write_only else STAGES:
        t0 = time.perf_counter()
        subprocess.run([enigma, "stage", stage, args.name, "--params", args.params, "--no-progress"], cwd=ROOT, check=True)
        seconds[stage] = round(time.perf_counter() - t0, 1)
        print(f"{stage}: {seconds[stage]:.0f}s", flush=True)

    from enigma.params import Params

    c = Params.load(ROOT / args.params).checkpoint_benchmark(args.name)
    page = (ROOT / c.report_dir / "index.md").read_text().split("\n", 1)[1]  # its title is replaced below
    page = page.replace("[summary.json](summary.json)", f"[{args.tag}.json]({args.tag}.json) (its `summary`)")
    commit = code_version(ROOT)
    last = RESULTS / f"{args.tag}.json"
    if args.write_only and last.is_file():  # the stage times of the run that built it
        seconds = json.loads(last.read_text()).get("seconds", {})
    times = " | ".join(f"{s} {v / 60:.1f} min" for s, v in seconds.items()) or "not recorded"
    lines = [f"# {args.name}: the dev twin of airline-lm, as it came (dev data: chosen on)", "",
             f"`{reproduce}` (code {commit}); stage times on 2 cores, where a stage had work left: {times}.",
             f"The checkpoints, truth and results are in data/{args.name}/ (not tracked); the page in {c.report_dir}/.",
             page]
    summary = json.loads((ROOT / c.report_dir / "summary.json").read_text())
    lines += value_parts(ROOT / c.results_dir, {k["name"]: k["truth"] for k in summary["checkpoints"]})
    write_result(args.tag, lines, {"reproduce": reproduce, "code": commit, "seconds": seconds, "summary": summary})


if __name__ == "__main__":
    main()
