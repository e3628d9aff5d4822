"""A benchmark whose agents are stood in for by retrieval over their transcripts, as a params file
of its own for ``studies/ope_enigma_rows.py --row-params``: the same store, rollouts and truth
(copied), other target actions.

On airline the sellers can run, so their own replies give the upper bound, and a stand-in built
from their transcripts shows what the stand-in costs, which on See 2019 cannot be measured (the
bots cannot run there). Writes ``<work>/params.yaml`` (params.yaml with ``pipeline.data_dir``
``<work>``, the benchmark's ``agent_spec``, ``sample.agents.transcripts`` and ``sample.n_samples`` changed, its
``knowledge`` null), then samples its target actions as ``enigma stage sample`` does:

    .venv/bin/python studies/stand_in_params.py airline data/work/standin_rollouts \\
        --agent-spec 'transcripts:{rollouts}?agent={agent}' --transcripts '{"both_sides": false}'
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("benchmark", help="an entry of params.yaml's benchmarks, its store and rollouts made")
    ap.add_argument("work", type=Path, help="the stand-in's data folder (its pipeline.data_dir)")
    ap.add_argument("--agent-spec", required=True, help="e.g. 'transcripts:{rollouts}?agent={agent}'")
    ap.add_argument("--transcripts", default="{}", metavar="JSON",
                    help="sample.agents.transcripts settings over params.yaml's (e.g. both_sides false: the "
                         "rollouts' other side is a customer, not the agent)")
    ap.add_argument("--n-samples", type=int, default=None, help="sample.n_samples (draws per logged state); default: params.yaml's")
    ap.add_argument("--estimators", default=None, metavar="A,B",
                    help="the benchmark's estimators in the written file, for `enigma stage train <benchmark> --params` "
                         "it (e.g. the comparators that read the replies); default: params.yaml's")
    ap.add_argument("--params", type=Path, default=REPO / "params.yaml")
    args = ap.parse_args()

    from enigma.params import Params
    from enigma.pipeline.sample import sample

    data = yaml.safe_load(args.params.read_text())
    if args.benchmark not in data["benchmarks"]:
        sys.exit(f"{args.params}: no benchmark {args.benchmark!r}")
    source = Params.load(args.params).benchmark(args.benchmark)
    target = args.work / args.benchmark
    for part in (source.store, source.rollouts, source.truth):
        if part is None or not part.exists():
            sys.exit(f"{args.benchmark}: its store, rollouts and truth are needed ({part} is missing: "
                     f"run `dvc repro rollouts@{args.benchmark}` first)")
        if not (target / part.name).exists():
            target.mkdir(parents=True, exist_ok=True)
            (shutil.copytree if part.is_dir() else shutil.copy2)(part, target / part.name)
    entry = data["benchmarks"][args.benchmark]
    data["pipeline"]["data_dir"] = str(args.work)
    entry["agent_spec"] = args.agent_spec
    # a stand-in's replies were said in other conversations: no knowledge base may judge them
    # (enigma.pipeline.config refuses both); a row that studies one names it in its dice settings
    entry["knowledge"] = None
    if args.estimators:
        entry["estimators"] = [e.strip() for e in args.estimators.split(",") if e.strip()]
    transcripts = data["sample"]["agents"]["transcripts"]
    transcripts.update(json.loads(args.transcripts))
    if args.n_samples is not None:
        data["sample"]["n_samples"] = args.n_samples
    path = args.work / "params.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    print(f"{path}: agent_spec {args.agent_spec!r}, n_samples {data['sample']['n_samples']}, transcripts {transcripts}", flush=True)
    params = Params.load(path)
    print(sample(params.benchmark(args.benchmark), params, progress=True), flush=True)

if __name__ == "__main__":
    main()
