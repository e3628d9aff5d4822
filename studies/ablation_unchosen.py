"""Issue 58, direction 2: does each part of ENIGMA's default carry over to data that never chose it?

The reply measures, the grounding block, the fitted-Q ensemble, the source reading and the fitted
Q itself were each chosen on See 2019 or airline (their dev halves, or before the split, the whole
of them). Here each is taken out alone (the rows ``enigma-ablate-*`` of studies/params.yaml: enigma
with one setting changed and no interval) and run, leave-one-agent-out as the train stage runs it
(``enigma.pipeline.train.run_agent``), on the agents no choice read: all of airline-heldout and the
TEST halves of airline and See 2019 (``enigma.evaluation.split``, params.yaml ``report.split``).
Each agent is still estimated from all the other agents' logs; only the agents whose correlation is
reported are run. The paired baseline is the product's ``enigma`` as the main run saved it
(data/<b>/results/enigma, with its interval: the interval does not move the point estimate, which
``check`` confirms on one agent). A study: it reports what it measures and changes no default.

    ENIGMA_CACHE_DIR=/work/main/cache nice .venv/bin/python studies/ablation_unchosen.py check --data /work/main/data --out /work/abl-results
    ENIGMA_CACHE_DIR=/work/main/cache nice .venv/bin/python studies/ablation_unchosen.py run --data /work/main/data --out /work/abl-results
    .venv/bin/python studies/ablation_unchosen.py report --data /work/main/data --out /work/abl-results

``--data``: the folder of the benchmarks' stores, targets, rollouts, truth and saved results (read
only); ``--out``: where the rows' results go, one folder per benchmark (re-running reuses every
finished agent). Output: studies/results/ablation_unchosen.{md,json}.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
LAB = ROOT / "studies" / "params.yaml"
TAG = "ablation_unchosen"
BASELINE = "enigma"
PAIR = "enigma-ablate-none"  # the baseline as the rows run: enigma without its interval
# The most informative first: the sellers designed after the defaults were frozen, then the test
# half of the benchmark of human ratings, then airline's.
BENCHMARKS = ("airline-heldout", "see2019", "airline")
VARIANTS = {  # row -> the part it takes out
    "enigma-ablate-reply-measures": "reply measures (`reply_measures: false`)",
    "enigma-ablate-grounding": "grounding (`grounding: false`)",
    "enigma-ablate-fqe-ensemble": "the fitted-Q ensemble: one fitted Q, the ensemble's first member without the linear skip path "
                                  "(`fqe: {agreement: false, ensemble: 1, linear_members: 0}`)",
    "enigma-ablate-source-reading": "the source reading: a stand-in's reply read after the logged dialogue (`target_history: logged`)",
    "enigma-ablate-fitted-q": "the fitted Q: the linear LSTD Q on nu's basis (`q_model: lstd`)",
}
SOURCE_ROW = "enigma-ablate-source-reading"
RUN_NOTE = (
    "Run note: during the run (21:38 UTC, 2026-11-28) something outside this study rewrote airline's rollouts and "
    "targets under /work/main/data in place; the run stopped on a target file missing for a moment and was restarted "
    "(`--benchmarks airline`), reusing by fingerprint the runs made before. Each benchmark's line `data fingerprints` "
    "below counts the results here whose experience and target fingerprints equal those of the saved enigma's result "
    "for the same agent (the same data, read the same way).")
# Which single Q is "the ensemble taken out": the default's Q is the mean of 3 fits from consecutive
# seeds, the last of them with a linear skip path. One Q with the linear path would keep a member
# the default weighs at a third and make it the whole Q, a Q the default never is; one Q without it
# is the default's first member alone, so that is the row (the linear member goes with the
# ensemble it is a member of; its own share is not separated here).
ENSEMBLE_CHOICE = (
    "The ensemble row: the default's Q is the mean of 3 fitted Qs from consecutive seeds, the last with a linear "
    "skip path (`fqe: {agreement: false, ensemble: 3, linear_members: 1}`). A row's `fqe` replaces the base's whole "
    "(`dice_config` merges the dice entries key by key, so a nested section is replaced, not merged), so the row "
    "states all three keys. Taken out is the ensemble as it stands: one Q, the first member, without the linear "
    "path (the default's members 2 and 3, the linear one included, go). `ensemble: 1` with its linear member would "
    "instead make the linear-path Q, a third of the default's mean, the whole Q: a Q the default never is, so two "
    "changes in one. What the linear member alone adds is therefore not separated here.")


def lab_params(data: Path):
    """studies/params.yaml with the benchmarks' data read from ``data``."""
    from enigma.params import Params, load_yaml

    raw = load_yaml(LAB)
    raw.setdefault("pipeline", {})["data_dir"] = str(data)
    return Params.from_dict(raw, LAB)


def test_agents(b, params) -> list[str]:
    """The benchmark's held-out agents of the test half (airline-heldout: all of them)."""
    from enigma.evaluation.split import split_agents
    from enigma.pipeline.store import heldout_agents

    agents, _ = heldout_agents(b)
    return split_agents(agents, params.report.split, b.name)["test"]


def targets_record_sources(b) -> bool:
    """Whether any sampled target of the benchmark records the chat its reply was said in: where
    none does, ``target_history: logged`` and ``source`` read the same history (config.py)."""
    import pyarrow.parquet as pq

    return any("source_context" in pq.read_schema(f).names for f in sorted(b.targets_dir.glob("*.parquet")))


def run_rows(b, params, rows: list[str], agents: list[str], out: Path, say=print) -> int:
    """Each row on each agent through the train stage's own path into ``out``; returns failures."""
    import time

    from enigma.contracts import Regime
    from enigma.estimators import benchmark_estimator
    from enigma.pipeline.sample import read_targets
    from enigma.pipeline.train import run_agent
    from enigma.store.experience import ExperienceStore

    store = ExperienceStore.open(b.store)
    rollouts = ExperienceStore.open(b.rollouts) if b.rollouts is not None else None
    out.mkdir(parents=True, exist_ok=True)
    failures = 0
    for name in rows:
        est = benchmark_estimator(b, name, params)
        needs = Regime.REPLIES_AT_LOGGED_STATES in est.regimes
        for a in agents:
            t0 = time.perf_counter()
            targets = read_targets(b, a) if needs else None
            _, failure = run_agent(b, est, a, targets, store, rollouts, out)
            failures += failure is not None
            say(f"{b.name} {name} / {a}: {'FAILED ' + str(failure)[:200] if failure else f'{time.perf_counter() - t0:.1f}s'}")
            sys.stdout.flush()
    return failures


def plan(b, params) -> tuple[list[str], dict[str, list[str]]]:
    """The test agents, and the agents each row runs on: every test agent, except the source
    reading where no target records a source (there it is the baseline's settings in effect; one
    agent is run to show it)."""
    agents = test_agents(b, params)
    per_row = {name: agents for name in (PAIR, *VARIANTS)}
    if not targets_record_sources(b):
        per_row[SOURCE_ROW] = agents[:1]
    return agents, per_row


SAVED = "enigma (saved)"  # the product's enigma as the main run saved it, with its interval


def wide(df):
    """agent x rating of the finite estimates (a failed run's rows are NaN: left out)."""
    return df.pivot(index="agent_id", columns="rating", values="estimate").astype(float)


def score_pair(name, ew, base, tw, ratings, cfg) -> dict[str, Any]:
    """``name``'s Pearson on the agents both it and the pair estimated, mean and per rating, and
    its paired difference from the pair's (bootstrap over agents, the report's seed and resamples)."""
    from enigma.evaluation.correlation import paired_difference, score_estimator

    agents = [a for a in tw.index if a in ew.index and a in base.index
              and ew.loc[a, ratings].notna().all() and base.loc[a, ratings].notna().all()]
    kw = dict(resamples=cfg.bootstrap_resamples, seed=cfg.seed, confidence=cfg.confidence)
    t = tw.loc[agents]
    out: dict[str, Any] = {"n_agents": len(agents), "agents": agents}
    for scope in (ratings, *([r] for r in ratings)):
        key = "mean" if len(scope) > 1 else scope[0]
        a = score_estimator(name, ew, t, list(scope), **kw)
        b = score_estimator(PAIR, base, t, list(scope), **kw)
        out[key] = {"pearson": a.means["pearson"], "pearson_ci95": a.mean_ci["pearson"],
                    "pair_pearson": b.means["pearson"],
                    "difference": paired_difference(a, b, "pearson", cfg.confidence)}
    return out


def same_data(rows_dir: Path, saved_dir: Path) -> tuple[int, int]:
    """How many result files under ``rows_dir`` (<row>/<agent>.json) have the experience and target
    parts of their fingerprint (``<experience>-<estimator>-<target>``) equal to the saved result's
    of the same agent in ``saved_dir``; and how many have a saved result to compare."""
    same = total = 0
    for f in sorted(rows_dir.glob("*/*.json")):
        s = saved_dir / f.name
        if not s.is_file():
            continue
        mine, theirs = (json.loads(x.read_text())["fingerprint"].split("-") for x in (f, s))
        total += 1
        same += len(mine) == len(theirs) == 3 and mine[0] == theirs[0] and mine[2] == theirs[2]
    return same, total


def value_gaps(a, b) -> dict[str, float]:
    """Max abs difference between two runs' three values (weighted, q, dr: the solver's
    diagnostics), over the agents and ratings both have: which part of the fit two runs differ in."""
    import numpy as np

    def values(df):
        out = {}
        for agent, rating, diag in zip(df.agent_id, df.rating, df.diagnostics):
            got = json.loads(diag).get("all", {}).get("values", {}).get(rating) if isinstance(diag, str) else None
            if got:
                out[agent, rating] = got
        return out

    va, vb = values(a), values(b)
    keys = [k for k in va if k in vb]
    return {v: float(np.nanmax([abs(va[k][v] - vb[k][v]) for k in keys])) if keys else float("nan")
            for v in ("weighted", "q", "dr")}


def reading(diff: dict[str, Any] | None) -> str:
    """A paired difference (ablated - default) in words: taking the part out lowers the
    correlation (the part carries over), raises it (the part hurts here) or neither detectably."""
    if not diff or diff["ci95"][0] is None:
        return "no interval"
    lo, hi = diff["ci95"]
    if hi < 0:
        return "carries over"
    if lo > 0:
        return "hurts here"
    return "no detectable effect"


def cmd_report(args) -> None:
    import numpy as np

    from enigma.evaluation.results import read_results
    from enigma.evaluation.truth import read_truth, truth_wide
    from provenance import code_version
    from result_files import paired_cell, write_result

    params = lab_params(args.data)
    cfg = params.report
    payload: dict[str, Any] = {
        "command": "ENIGMA_CACHE_DIR=/work/main/cache nice .venv/bin/python " + " ".join(
            ["studies/ablation_unchosen.py", "run", "--data", str(args.data), "--out", str(args.out)]),
        "report_command": " ".join(["python", "studies/ablation_unchosen.py", *map(shlex.quote, sys.argv[1:])]),
        "code": code_version(), "pair": PAIR, "variants": VARIANTS, "benchmarks": {}}
    lines = [f"# {TAG}: each part of ENIGMA's default taken out alone, on data no choice read (issue 58, direction 2)", "",
             f"    {payload['command']}", f"    python studies/ablation_unchosen.py report --data {args.data} --out {args.out}", "",
             f"Code: {payload['code']}. Rows: studies/params.yaml `enigma-ablate-*`; each is params.yaml's `enigma` with "
             f"one setting changed and no interval (`interval_resamples: 0`), paired against `{PAIR}` (enigma itself "
             "without its interval, run the same way). Data: all 16 agents of airline-heldout (sellers designed after the "
             "defaults were frozen) and the test halves (`report.split`) of airline and See 2019; every agent estimated "
             "leave-one-agent-out from all the other agents' logs, through the train stage's `run_agent`. "
             f"Pearson with the truth over the agents; the difference is row - `{PAIR}`, mean over the ratings, with a "
             f"paired bootstrap over agents ({cfg.bootstrap_resamples} resamples, seed {cfg.seed}, "
             f"{cfg.confidence:.0%}): below 0, taking the part out loses correlation (the part carries over).", "",
             "What each row takes out:", ""]
    lines += [f"- `{n}`: {what}" for n, what in VARIANTS.items()]
    lines += ["", ENSEMBLE_CHOICE, "", RUN_NOTE]
    for name in args.benchmarks:
        b = params.benchmark(name)
        agents, per_row = plan(b, params)
        tw = truth_wide(read_truth(b.truth))
        ratings = list(cfg.ratings) if cfg.ratings else sorted(tw.columns)
        tw = tw.loc[[a for a in agents if a in tw.index], ratings]
        found = read_results(args.out / name)
        rows = {n: wide(g) for n, g in found.groupby("estimator")}
        seconds = {n: float(g.drop_duplicates("agent_id")["seconds"].mean()) for n, g in found.groupby("estimator")
                   if "seconds" in g}
        saved = wide(saved_results(b, BASELINE))
        base = rows.get(PAIR)
        # in the json only: the rows ran at different loads of a shared machine, so not a cost comparison
        entry: dict[str, Any] = {"test_agents": agents, "ratings": ratings, "rows": {}, "seconds_per_agent": seconds}
        half = "all 16 agents (test only)" if name == "airline-heldout" else f"test half, {len(agents)} agents"
        lines += ["", f"## {name} ({half})", ""]
        if base is None:
            lines.append(f"`{PAIR}` has not run here yet: nothing to pair.")
            payload["benchmarks"][name] = entry
            continue
        common = [a for a in base.index if a in saved.index]
        gap = float(np.nanmax(np.abs(base.loc[common, ratings].to_numpy() - saved.loc[common, ratings].to_numpy())))
        entry["pair_vs_saved_max_abs"] = gap
        head = "| row | n | mean Pearson [95%] | " + " | ".join(ratings) + " | row - pair, mean [95%] | " + \
            " | ".join(f"{r}: row - pair" for r in ratings) + " | reading |"
        lines += [head, "|" + "---|" * (head.count("|") - 1)]
        for row in (SAVED, *VARIANTS):
            ew = saved if row == SAVED else rows.get(row)
            if ew is None:
                lines.append(f"| `{row}` | 0 | not run yet |" + " |" * (head.count("|") - 4))
                continue
            if row == SOURCE_ROW and len(per_row[row]) < len(agents):
                a0 = per_row[row][0]
                d = float(np.nanmax(np.abs(ew.loc[a0, ratings].to_numpy() - base.loc[a0, ratings].to_numpy()))) \
                    if a0 in ew.index and a0 in base.index else None
                entry["rows"][row] = {"same_settings_in_effect": True, "checked_agent": a0, "max_abs_vs_pair": d}
                lines.append(f"| `{row}` | 1 | no target here records a source, so `logged` reads what `source` reads: "
                             f"run on {a0} only, max abs apart from the pair {d:.2g} |" + " |" * (head.count("|") - 4))
                continue
            got = score_pair(row, ew, base, tw, ratings, cfg)
            got["reading"] = reading(got["mean"]["difference"])
            entry["rows"][row] = got
            m = got["mean"]
            ci = m["pearson_ci95"]
            lines.append(
                f"| `{row}` | {got['n_agents']} | {m['pearson']:+.3f} [{ci[0]:+.3f}, {ci[1]:+.3f}] | "
                + " | ".join(f"{got[r]['pearson']:+.3f}" for r in ratings) + f" | {paired_cell(m['difference'])} | "
                + " | ".join(paired_cell(got[r]["difference"]) for r in ratings)
                + f" | {got['reading'] if row != SAVED else 'reference'} |")
        pair_score = score_pair(PAIR, base, base, tw, ratings, cfg)
        entry["rows"][PAIR] = {k: v for k, v in pair_score.items()}
        ci = pair_score["mean"]["pearson_ci95"]
        lines.append(f"| `{PAIR}` (the pair) | {pair_score['n_agents']} | {pair_score['mean']['pearson']:+.3f} "
                     f"[{ci[0]:+.3f}, {ci[1]:+.3f}] | " + " | ".join(f"{pair_score[r]['pearson']:+.3f}" for r in ratings)
                     + " |" * (len(ratings) + 2))
        same, total = same_data(args.out / name, b.results_dir() / BASELINE)
        entry["data_fingerprints_as_saved"] = [same, total]
        parts = value_gaps(found[found.estimator == PAIR], saved_results(b, BASELINE))
        entry["pair_vs_saved_value_gaps"] = parts
        lines += ["", f"`{PAIR}` against the saved `enigma` (interval 100): point estimates at most {gap:.2g} apart "
                  f"over {len(common)} agents, so the rows pair against `{PAIR}`, made the same way as they are. "
                  "Where the gap comes from, per value (max abs over agents and ratings): "
                  + ", ".join(f"{k} {v:.2g}" for k, v in parts.items())
                  + " (`weighted` reads the DICE fit alone, `q` the fitted Q alone, `dr` both). The DICE fit agrees "
                  "to float precision and a run here repeats itself bit for bit (`check` below), so the gap is the "
                  "fitted Q's SGD carrying the float-level differences of where the saved run was made into its value; "
                  "the interval does not enter (the point estimate is taken before it, `enigma.ope.trainer`). The "
                  "`enigma (saved)` row shows what that moves the correlations by: a floor under the rows' differences.",
                  "", f"Data fingerprints: {same} of {total} results here read the experience and targets the saved "
                  "enigma's result of the same agent read."]
        for kind, what in (("check", "`enigma` without its interval, run again (`check`)"),
                           ("check-interval", "`enigma` with its interval as params.yaml has it, run here (`check --interval`)")):
            f = args.out / kind / name / "check.json"
            if f.is_file():
                c = json.loads(f.read_text())
                entry[kind] = c
                vs_pair = f", from `{PAIR}` {c['max_abs_vs_pair']:.2g}" if "max_abs_vs_pair" in c else ""
                lines.append(f"- {what} on {c['agent']}: at most {c['max_abs_vs_saved']:.2g} from the saved estimate{vs_pair}.")
        payload["benchmarks"][name] = entry
    lines += ["", "## Reading", "",
              "Per row and benchmark, from the paired interval of the mean Pearson (row - pair): *carries over* where "
              "taking the part out lowers it (interval below 0), *hurts here* where it raises it (above 0), *no "
              "detectable effect* where the interval covers 0. The test halves are 14 agents and airline-heldout 16, "
              "so an interval of a few hundredths either way is what these data can resolve.", ""]
    for row in VARIANTS:
        said = []
        for name, entry in payload["benchmarks"].items():
            got = entry.get("rows", {}).get(row)
            if not got:
                continue
            if got.get("same_settings_in_effect"):
                said.append(f"{name}: the same settings in effect (no source recorded)")
                continue
            d = got["mean"]["difference"]
            said.append(f"{name}: {got['reading']} ({paired_cell(d)})" if d else f"{name}: no interval")
        lines.append(f"- `{row}`: " + ("; ".join(said) if said else "not run yet") + ".")
    write_result(TAG, lines, payload)


def cmd_run(args) -> None:
    params = lab_params(args.data)
    failures = 0
    for name in args.benchmarks:
        b = params.benchmark(name)
        _, per_row = plan(b, params)
        for row in (PAIR, *VARIANTS):
            failures += run_rows(b, params, [row], per_row[row], args.out / name)
    print(f"done; {failures} failed run(s)")


def baseline_no_interval(params):
    """The product's enigma with ``interval_resamples: 0``, under its own name (for ``check``)."""
    from enigma.params import Params

    data = params.model_dump(mode="json")
    data["estimators"][BASELINE]["dice"] = {**data["estimators"][BASELINE]["dice"], "interval_resamples": 0}
    return Params.from_dict(data)


def cmd_check(args) -> None:
    """The baseline without its interval (``--interval``: with it) on one agent against the saved estimate."""
    from enigma.evaluation.results import read_results

    params = lab_params(args.data)
    b = params.benchmark(args.benchmarks[0])
    agent = args.agent or test_agents(b, params)[0]
    # --interval: the product's enigma exactly as saved (its interval too), to tell whether a gap
    # between the pair and the saved estimates comes from the interval or from where they were made
    out = args.out / ("check-interval" if args.interval else "check") / b.name
    run_rows(b, params if args.interval else baseline_no_interval(params), [BASELINE], [agent], out)
    fresh = read_results(out).set_index("rating")["estimate"]
    saved = saved_results(b, BASELINE)
    saved = saved[saved.agent_id == agent].set_index("rating")["estimate"]
    gap = (fresh - saved.reindex(fresh.index)).abs()
    got = {"agent": agent, "interval": bool(args.interval), "max_abs_vs_saved": float(gap.max())}
    pair = args.out / b.name
    if (pair / PAIR).is_dir():
        p = read_results(pair)
        p = p[(p.estimator == PAIR) & (p.agent_id == agent)].set_index("rating")["estimate"]
        if len(p):
            got["max_abs_vs_pair"] = float((fresh - p.reindex(fresh.index)).abs().max())
    (out / "check.json").write_text(json.dumps(got, indent=1))
    print(f"{b.name}: {got}")


def saved_results(b, name: str):
    """Estimator ``name``'s saved results in the benchmark's main results folder."""
    from enigma.evaluation.results import read_results

    df = read_results(b.results_dir())
    return df[df.estimator == name]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("step", choices=("check", "run", "report"))
    ap.add_argument("--data", type=Path, default=ROOT / "data", help="the benchmarks' data folder (read only)")
    ap.add_argument("--out", type=Path, required=True, help="the rows' results folder, one subfolder per benchmark")
    ap.add_argument("--benchmarks", nargs="+", default=list(BENCHMARKS))
    ap.add_argument("--agent", default=None, help="check: the agent (default: the first test agent)")
    ap.add_argument("--interval", action="store_true", help="check: run enigma with its interval, as saved")
    args = ap.parse_args(argv)
    import torch

    torch.set_num_threads(1)  # one core: the machine's other is another job's
    {"check": cmd_check, "run": cmd_run, "report": cmd_report}[args.step](args)


if __name__ == "__main__":
    main()
