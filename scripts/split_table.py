"""The test and dev halves of committed reports, side by side, in Markdown.

    .venv/bin/python scripts/split_table.py reports/see2019/summary.json reports/see2019-ownchats/summary.json
    .venv/bin/python scripts/split_table.py reports/*/summary.json --out studies/results/split_halves.md
    .venv/bin/python scripts/split_table.py --wide reports/airline/summary.json reports/airline-seed1/summary.json

``--wide`` puts several reports in one table (for docs/results.md): one row per estimator, ranked on
the first report's test half, and each report's test and dev halves side by side.

A report built since the split (``splits`` in its summary) is read as it is. One built before it
is scored again by the report's own code: its per-agent estimates and truth (``agents``) go back
through ``enigma.evaluation.summary.build_summary`` with the report's bootstrap settings and
params.yaml's ``report.split``, so the halves, the correlations and the paired differences are
the ones its train stage would give it today. Per benchmark, one row per estimator ranked on the
test half: mean Pearson [95% CI] on each half, and ENIGMA's paired difference with the best other
estimator on each half.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from enigma.evaluation.config import ReportConfig
from enigma.evaluation.split import HALVES
from enigma.evaluation.summary import build_summary
from enigma.evaluation.summary_file import read_summary
from enigma.evaluation.truth import check_truth
from enigma.params import Params


def rescored(summary: dict, split_cfg) -> dict:
    """``summary`` with its splits: as it is, or scored again from its per-agent table."""
    if "splits" in summary:
        return summary
    rows, truth = [], []
    for agent, per in summary["agents"].items():
        for rating, cell in per.items():
            truth.append({"agent_id": agent, "rating": rating, "value": cell["truth"]})
            for name in summary["estimators"]:
                v = cell.get(name)
                rows.append({"estimator": name, "agent_id": agent, "rating": rating, "estimate": v,
                             "error": None if v is not None else "no estimate in the summary"})
    s = summary.get("settings", {})
    cfg = ReportConfig(bootstrap_resamples=s.get("bootstrap_resamples", 1000), seed=s.get("seed", 0),
                       confidence=s.get("confidence", 0.95), ratings=summary["ratings"], split=split_cfg,
                       loo_mean_estimator=s.get("loo_mean_estimator", "experience-mean"), plots=False)
    out, _ = build_summary(pd.DataFrame(rows), check_truth(pd.DataFrame(truth)), summary["benchmark"], cfg)
    return out


def _f(x) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def _ci(c) -> str:
    return "" if not c or c[0] is None else f" [{c[0]:.2f}, {c[1]:.2f}]"


def table(summary: dict, enigma: str = "enigma") -> str:
    halves = summary["splits"]
    lines = [f"### {summary['benchmark']}", "",
             f"test half: {len(halves['test'])} agents; dev half: {len(halves['dev'])} agents", ""]
    for h in HALVES:
        ranking = [r["estimator"] for r in summary["split_ranking"][h]]
        pair = summary["split_comparison"][h].get("enigma_minus_best_other")
        if halves[h] and pair:
            lines.append(f"- {h}: ENIGMA ranks {ranking.index(enigma) + 1} of {len(ranking)}; minus {pair['other']}: "
                         f"{pair['difference']:+.3f}{_ci(pair['ci95'])} (paired)")
    lines += ["", "| test rank | estimator | test: mean Pearson [95% CI] | dev: mean Pearson [95% CI] | all agents |",
              "|---|---|---|---|---|"]
    ests = summary["estimators"]
    for i, row in enumerate(summary["split_ranking"]["test"], start=1):
        e = ests[row["estimator"]]
        t, d = e["split"]["test"], e["split"]["dev"]
        lines.append(f"| {i} | {row['estimator']} | {_f(t['mean_pearson'])}{_ci(t['mean_pearson_ci95'])} | "
                     f"{_f(d['mean_pearson'])}{_ci(d['mean_pearson_ci95'])} | {_f(e['mean_pearson'])} |")
    return "\n".join(lines) + "\n"


def test_half_cells(summary: dict, enigma: str = "enigma") -> dict[str, str]:
    """ENIGMA's test-half cells of a results row: its mean Pearson [CI], the best other
    estimator's, their paired difference, and ENIGMA's rank ("" where there is no other)."""
    ests = summary["estimators"]
    ranking = [r["estimator"] for r in summary["split_ranking"]["test"]]
    pair = summary["split_comparison"]["test"].get("enigma_minus_best_other")
    e = ests[enigma]["split"]["test"]
    cells = {"enigma": f"{_f(e['mean_pearson'])}{_ci(e['mean_pearson_ci95'])}", "other": "", "difference": "",
             "rank": f"{ranking.index(enigma) + 1} of {len(ranking)}"}
    if pair:
        o = ests[pair["other"]]["split"]["test"]
        cells["other"] = f"{pair['other']} {_f(o['mean_pearson'])}{_ci(o['mean_pearson_ci95'])}"
        cells["difference"] = f"{pair['difference']:+.3f} [{pair['ci95'][0]:+.3f}, {pair['ci95'][1]:+.3f}]"
    return cells


def readme_row(summary: dict, label: str, enigma: str = "enigma") -> str:
    """One row of the README's results table, on the test half: ENIGMA, the best other estimator
    with ENIGMA's paired difference from it, and ENIGMA's rank (the dev half: docs/results.md)."""
    c = test_half_cells(summary, enigma)
    other = f"{c['other']}; ENIGMA − it {c['difference']}" if c["other"] else ""
    cells = [f"{label} ({len(summary['splits']['test'])})", c["enigma"], other, c["rank"]]
    return "| " + " | ".join(cells) + " |"


def wide_table(summaries: list[dict], enigma: str = "enigma") -> str:
    """Several reports in one table: a row per estimator (those of the first report in its test-half
    order, then any the others add), for each report the test half's and the dev half's mean Pearson
    [95% CI] (the dev column left out where a report's agents are all test); blank where a report
    has no such estimator."""
    order = [r["estimator"] for r in summaries[0]["split_ranking"]["test"]]
    for s in summaries[1:]:
        order += [r["estimator"] for r in s["split_ranking"]["test"] if r["estimator"] not in order]
    head, cols = ["estimator"], []
    for s in summaries:
        for h in HALVES:
            if s["splits"][h]:
                head.append(f"{s['benchmark']}: {h} ({len(s['splits'][h])})")
                cols.append((s, h))
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name in order:
        cells = [f"**{name}**" if name == enigma else name]
        for s, h in cols:
            e = s["estimators"].get(name)
            cells.append("" if e is None else f"{_f(e['split'][h]['mean_pearson'])}{_ci(e['split'][h]['mean_pearson_ci95'])}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


README_HEAD = ("| benchmark (test agents) | ENIGMA [95% CI] | best other estimator [95% CI]; ENIGMA − it (paired) | "
               "ENIGMA's rank |\n|---|---|---|---|")


def halves_row(summary: dict, label: str, enigma: str = "enigma") -> str:
    """One row of docs/results.md's table: the test half first, the dev half and all agents beside it."""
    halves, ests = summary["splits"], summary["estimators"]
    cells = [f"{label} ({len(halves['test'])} / {len(halves['dev'])})"]
    if halves["test"]:
        c = test_half_cells(summary, enigma)
        cells += [c["enigma"], c["other"], c["difference"], c["rank"]]
    else:
        cells += ["", "", "", ""]
    if halves["dev"]:
        pair = summary["split_comparison"]["dev"].get("enigma_minus_best_other")
        o = ests[pair["other"]]["split"]["dev"] if pair else None
        cells.append(f"{_f(ests[enigma]['split']['dev']['mean_pearson'])} / {_f(o['mean_pearson']) if o else 'n/a'}")
    else:
        cells.append("all test")
    order = [r["estimator"] for r in summary["ranking"]]
    cells.append(f"{_f(ests[enigma]['mean_pearson'])}, {order.index(enigma) + 1} of {len(order)}")
    return "| " + " | ".join(cells) + " |"


HALVES_HEAD = ("| benchmark (agents: test / dev) | ENIGMA, test half [95% CI] | best other estimator, test half | "
               "ENIGMA − best other, test half (paired) | ENIGMA's rank, test half | dev half: ENIGMA / best other | "
               "all agents: ENIGMA, rank |\n|---|---|---|---|---|---|---|")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("summaries", nargs="+", type=Path)
    ap.add_argument("--params", type=Path, default=Path("params.yaml"))
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--readme", action="store_true", help="the README's table: one test-half row per summary")
    ap.add_argument("--halves", action="store_true", help="docs/results.md's table: test half, dev half and all agents per summary")
    ap.add_argument("--wide", action="store_true", help="one table for all the summaries: a row per estimator, each report's halves side by side")
    args = ap.parse_args()
    split_cfg = Params.load(args.params).report.split
    if args.readme or args.halves:
        head, row = (README_HEAD, readme_row) if args.readme else (HALVES_HEAD, halves_row)
        print(head)
        for p in args.summaries:
            s = rescored(read_summary(p), split_cfg)
            print(row(s, s["benchmark"]))
        return
    if args.wide:
        print(wide_table([rescored(read_summary(p), split_cfg) for p in args.summaries]), end="")
        return
    parts = ["# Test and dev halves of the committed reports", "",
             f"`scripts/split_table.py` (split: salt {split_cfg.salt}, test share {split_cfg.test_share}). "
             "Reports built before the split are scored again from their per-agent estimates by the report's own code.", ""]
    for p in args.summaries:
        s = read_summary(p)
        parts.append(f"Source: `{p}`" + ("" if "splits" in s else " (scored again: built before the split)"))
        parts.append("")
        parts.append(table(rescored(s, split_cfg)))
    text = "\n".join(parts)
    if args.out:
        args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
