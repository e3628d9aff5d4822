"""ENIGMA's three values side by side on the DEV halves, from results the train stage already
wrote (issue 58): the doubly robust value the default reports (``dr``), the fitted Q's own value
at the opening states (``q``) and the post-normalised zeta-weighted value (``weighted``). Every
ENIGMA result file keeps all three (``diagnostics.all.values``), so nothing is estimated again.

Only the dev-half agents (``report.split``) are scored; the test halves are filtered out before
any correlation is taken. The three are scored against the truth with the same bootstrap
resamples of the agents, so each difference against ``dr`` is paired.

    .venv/bin/python studies/value_kinds_dev.py airline airline-seed1 airline-seed2 see2019 \\
        see2019-ownchats see2019-onsupport see2019-ownchats-onsupport

Reads ``<pipeline.data_dir>/<benchmark>/results/enigma`` (``dvc repro train@<benchmark>``), or,
given as ``LABEL=BENCHMARK:RESULTS_DIR``, a results folder ``studies/dev_rows.py`` wrote (a row's
``--work`` folder); ``--dev-of`` keeps the dev agents of another benchmark too (the delayed stores
are scored on airline's dev sellers). Output: studies/results/value_kinds_dev.{md,json}.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path


REPO = Path(__file__).resolve().parents[1]
KINDS = ("dr", "q", "weighted")


def dev_values(results: "pd.DataFrame", dev: list[str]) -> dict[str, "pd.DataFrame"]:  # noqa: F821
    """Each value kind's [agent x rating] estimates of the dev agents, from the rows' diagnostics."""
    import pandas as pd

    part = results[(results.estimator == "enigma") & results.agent_id.isin(dev) & results.error.isna()]
    missing = sorted(set(dev) - set(part.agent_id))
    if missing:
        raise SystemExit(f"no ENIGMA result for dev agent(s) {missing}: run `dvc repro train@<benchmark>` first")
    records = []
    for row in part.itertuples():
        values = json.loads(row.diagnostics)["all"]["values"][row.rating]
        records += [{"kind": k, "agent_id": row.agent_id, "rating": row.rating, "estimate": values[k]} for k in KINDS]
    frame = pd.DataFrame(records)
    return {k: g.pivot(index="agent_id", columns="rating", values="estimate").loc[dev] for k, g in frame.groupby("kind")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("benchmarks", nargs="+")
    ap.add_argument("--params", type=Path, default=REPO / "params.yaml")
    ap.add_argument("--tag", default="value_kinds_dev")
    ap.add_argument("--dev-of", metavar="BENCHMARK", default=None, help="only the dev agents of this benchmark too")
    args = ap.parse_args()

    from enigma.evaluation.correlation import paired_difference, score_estimator
    from dev_rows import dev_agents, dev_truth
    from enigma.evaluation.results import read_results
    from enigma.params import Params
    from provenance import code_version
    from result_files import paired_cell, write_result

    params = Params.load(args.params)
    table, payload = [], {}
    for spec in args.benchmarks:
        label, _, rest = spec.partition("=") if "=" in spec else (spec, "", spec)
        name, _, folder = rest.partition(":")
        dev = dev_agents(params, name)
        if args.dev_of:
            dev = sorted(set(dev) & set(dev_agents(params, args.dev_of)))
        if not dev:
            print(f"{name}: no dev half (report.split.test_only names it): skipped", file=sys.stderr)
            continue
        truth = dev_truth(params, name, dev)
        ratings = list(truth.columns)
        values = dev_values(read_results(Path(folder) if folder else params.benchmark(name).results_dir()), dev)
        scores = {k: score_estimator(k, values[k][ratings], truth, ratings) for k in KINDS}
        diffs = {k: paired_difference(scores[k], scores["dr"], "pearson", 0.95) for k in KINDS if k != "dr"}
        means = {k: scores[k].means["pearson"] for k in KINDS}
        spread = {k: float(sum(scores[k].per_rating[r]["spread_ratio"] for r in ratings) / len(ratings)) for k in KINDS}
        table.append(f"| {label} | {len(dev)} | " + " | ".join(f"{means[k]:.3f}" for k in KINDS)
                     + f" | {paired_cell(diffs['q'])} | {paired_cell(diffs['weighted'])} | "
                     + " / ".join(f"{spread[k]:.2f}" for k in KINDS) + " |")
        payload[label] = {"dev_agents": dev, "mean_pearson": means, "mean_spread_ratio": spread, "paired_vs_dr": diffs}

    cmd = shlex.join([".venv/bin/python", "studies/value_kinds_dev.py", *sys.argv[1:]])
    code = code_version()
    lines = ["# ENIGMA's three values on the dev halves (issue 58)", "", f"`{cmd}` (code: {code})", "",
             "From saved ENIGMA results: the train stage's (params.yaml's default, which reports `dr`, its zeta clipped at "
             "`dr_zeta_cap`), or for a `LABEL=BENCHMARK:FOLDER` a `studies/dev_rows.py` row's (its settings); every result keeps "
             "all three values. Dev-half agents only (`report.split`): no test-half agent is scored. Mean Pearson over "
             "the ratings; differences against `dr` paired over 1000 bootstrap resamples of the agents (95%).", "",
             "| benchmark | dev agents | dr | q | weighted | q − dr | weighted − dr | spread ratio dr / q / weighted |",
             "|---|---|---|---|---|---|---|---|", *table]
    write_result(args.tag, lines, {"reproduce": cmd, "code": code, "benchmarks": payload})


if __name__ == "__main__":
    main()
