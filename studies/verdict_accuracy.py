"""How often is the verdict wrong, and does the default interval cover? Issue 61's measurement.

For each benchmark, every agent's leave-one-agent-out estimate (the train stage's results) and
its truth; then, through ``enigma.evaluation.calibration`` (the code the report, the nightly job
and ``enigma estimate`` use, not a second implementation):

- each agent's **calibrated interval**, calibrated on the other agents: coverage and mean width;
- every **pair** of agents judged by ``calibration.verdict``, calibrated on the agents other than
  the two, as the nightly job judges a new agent against the incumbent: verdicts called, wrong
  direction (against the sign of the true gap), and power (pairs with a true gap over 0.05 called
  the right way).

Per half (``enigma.evaluation.split`` with params.yaml's ``report.split``): choices are made on
the dev half; the test half is what is reported. Pairs are taken within a half; the calibration
of a pair or an agent uses every other agent of the benchmark, as a user's store would.

    .venv/bin/python studies/verdict_accuracy.py airline=data/airline airline-seed1=data/airline-seed1 \\
        airline-seed2=data/airline-seed2 see2019=reports/see2019/summary.json

A benchmark is ``NAME=DIR`` (``DIR/results`` and ``DIR/truth.parquet``) or ``NAME=SUMMARY.json``
(the per-agent estimates and truth a committed report holds, for data not on this machine).
Output: studies/results/<tag>.md and .json.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO))

from studies.result_files import write_result  # noqa: E402

from enigma.evaluation import calibration as calib  # noqa: E402
from enigma.evaluation.split import HALVES, SplitConfig, split_agents  # noqa: E402

TARGETS = {"coverage": 0.90, "wrong_rate": 0.025, "power_gap_0_05": 0.60}


def load(source: str, estimator: str) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, float]], str]:
    """``(estimates[rating][agent], truth[rating][agent], what)`` from a data folder or a summary."""
    path = Path(source)
    if path.suffix == ".json":
        s = json.loads(path.read_text())
        est = {r: {a: c[r][estimator] for a, c in s["agents"].items() if c[r].get(estimator) is not None} for r in s["ratings"]}
        truth = {r: {a: c[r]["truth"] for a, c in s["agents"].items()} for r in s["ratings"]}
        return est, truth, f"committed report `{source}`"
    from enigma.evaluation.results import read_results
    from enigma.evaluation.truth import read_truth, truth_wide

    res = read_results(path / "results")
    res = res[(res["estimator"] == estimator) & res["error"].isna()]
    tw = truth_wide(read_truth(path / "truth.parquet"))
    est = {r: dict(zip(g["agent_id"], g["estimate"].astype(float))) for r, g in res.groupby("rating")}
    truth = {r: tw[r].dropna().to_dict() for r in tw.columns if r in est}
    return est, truth, f"results `{source}/results` against `{source}/truth.parquet`"


def measure(name: str, est: dict, truth: dict, level: float, split: SplitConfig) -> dict:
    agents = sorted(set().union(*[set(v) for v in est.values()]) & set().union(*[set(v) for v in truth.values()]))
    halves = split_agents(agents, split, name)
    out = {"halves": halves, "ratings": {}}
    for r in sorted(est):
        e, t = est[r], truth.get(r, {})
        pairs = calib.pair_verdicts(e, t, level)
        intervals = calib.calibrated_intervals(e, t, level)
        per = {}
        for h in (*HALVES, "all"):
            keep = None if h == "all" else halves[h]
            iv = calib.interval_accuracy({a: v for a, v in intervals.items() if keep is None or a in keep}, t)
            per[h] = {"interval": iv, "verdicts": calib.verdict_accuracy(pairs, keep),
                      "how": sorted({v["how"] for a, v in intervals.items() if keep is None or a in keep}),
                      "pair_rows": [p for p in pairs if keep is None or set(p["agents"]) <= set(keep)]}
        out["ratings"][r] = per
    return out


def _f(v, digits=3):
    return "n/a" if v is None else f"{v:.{digits}f}"


def _pct(v):
    return "n/a" if v is None else f"{100 * v:.1f}%"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("benchmarks", nargs="+", help="NAME=DIR or NAME=SUMMARY.json")
    ap.add_argument("--estimator", default="enigma")
    ap.add_argument("--params", default=str(REPO / "params.yaml"))
    ap.add_argument("--level", type=float, default=None, help="default: params report.confidence")
    ap.add_argument("--tag", default="verdict_accuracy")
    ap.add_argument("--note", action="append", default=[], help="a line for the output's notes (repeatable)")
    args = ap.parse_args(argv)
    params = yaml.safe_load(Path(args.params).read_text())
    report = params.get("report", {})
    level = args.level if args.level is not None else float(report.get("confidence", 0.95))
    split = SplitConfig(**(report.get("split") or {}))
    results, sources = {}, {}
    for spec in args.benchmarks:
        name, sep, source = spec.partition("=")
        if not sep:
            sys.exit(f"error: {spec!r}: expected NAME=DIR or NAME=SUMMARY.json")
        est, truth, sources[name] = load(source, args.estimator)
        results[name] = measure(name, est, truth, level, split)

    given = list(argv if argv is not None else sys.argv[1:])
    # the notes do not change a number: the command is shown without them
    shown = [a for i, a in enumerate(given) if a != "--note" and (i == 0 or given[i - 1] != "--note")]
    cmd = shlex.join([".venv/bin/python", "studies/verdict_accuracy.py", *shown])
    lines = [f"# Verdict accuracy and calibrated-interval coverage ({args.estimator}, level {level:.0%})", "",
             f"`{cmd}`", "",
             "Every agent's calibrated interval is calibrated on the benchmark's other agents; every pair of agents is judged by "
             "`enigma.evaluation.calibration.verdict`, calibrated on the agents other than the two (the nightly job's rule). "
             "*wrong*: a verdict called against the sign of the true gap; *power*: the share of the pairs whose true gap "
             f"exceeds 0.05 called the right way. Targets (issue 61): coverage >= {TARGETS['coverage']:.2f} for every rating; "
             f"wrong <= {TARGETS['wrong_rate']:.1%} of the verdicts called; power >= {TARGETS['power_gap_0_05']:.0%}. "
             "Pairs within a half. No choice's rule read a test-half row, but the test halves have been shown in every report, "
             "so they are not unseen ([docs/results.md](../../docs/results.md)).", ""]
    lines += ["Sources: " + "; ".join(f"{n}: {s}" for n, s in sources.items()) + ".", ""]
    lines += [f"- {n}" for n in args.note] + ([""] if args.note else [])
    pooled = {}
    for h in (*HALVES, "all"):
        lines += [f"## {h} half" if h != "all" else "## all agents", "",
                  "| benchmark | rating | agents | coverage | mean width | pairs | called | wrong | wrong rate | power at gap > 0.05 (pairs) | interval made by |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        rows, by_rating = [], {}
        for name, res in results.items():
            for r, per in res["ratings"].items():
                x = per[h]
                iv, v = x["interval"] or {}, x["verdicts"]
                rows += x["pair_rows"]
                by_rating.setdefault(r, []).extend(x["pair_rows"])
                lines.append(f"| {name} | {r} | {iv.get('n_agents', 0)} | {_f(iv.get('coverage'), 2)} | {_f(iv.get('mean_width'))} | "
                             f"{v['pairs']} | {v['called']} | {v['wrong']} | {_pct(v['wrong_rate'])} | "
                             f"{_pct(v['power_gap_0_05'])} ({v['pairs_gap_0_05']}) | {'; '.join(x['how'])} |")
        pooled[h] = calib.verdict_accuracy(rows)
        p = pooled[h]
        lines += ["", f"Pooled over every benchmark and rating ({h}): {p['called']} of {p['pairs']} pairs called, {p['wrong']} wrong "
                  f"({_pct(p['wrong_rate'])}); power {_pct(p['power_gap_0_05'])} over {p['pairs_gap_0_05']} pairs with a true gap "
                  "over 0.05.", "", "Per rating, pooled over the benchmarks that have it:", "",
                  "| rating | pairs | called | wrong | wrong rate | power at gap > 0.05 (pairs) |", "|---|---|---|---|---|---|"]
        for r, pr in sorted(by_rating.items()):
            v = calib.verdict_accuracy(pr)
            lines.append(f"| {r} | {v['pairs']} | {v['called']} | {v['wrong']} | {_pct(v['wrong_rate'])} | "
                         f"{_pct(v['power_gap_0_05'])} ({v['pairs_gap_0_05']}) |")
        lines.append("")
    dump = {"command": cmd, "level": level, "estimator": args.estimator, "sources": sources, "pooled": pooled,
            "benchmarks": {n: {"halves": r["halves"], "ratings": {k: {h: {kk: vv for kk, vv in x.items() if kk != "pair_rows"}
                                                                      for h, x in per.items()} for k, per in r["ratings"].items()}}
                           for n, r in results.items()}}
    write_result(args.tag, lines, dump)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
