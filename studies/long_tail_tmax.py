"""Long-tailed dialogue lengths and ``dice.tmax`` (issue 58, direction 1): a study on a benchmark
built for it from the airline store, never a product change.

The airline store's dialogues are short (median 4 agent turns, longest 8), while a rated-chat set
kept apart for checking has a long tail (median 9, p90 27, the longest in the hundreds), where
today's rule, ``tmax = max(15, longest + 2)`` (``enigma.ope.config.derived_tmax``), pads the median
dialogue dozens of times and rests the slot constraints past the 90th percentile on a handful of
dialogues. This script builds a long-tailed copy of the airline store and compares, leave-one-agent-
out on the dev half of the agents (``report.split``), ENIGMA as params.yaml runs it but without the
interval (``interval_resamples: 0``) on:

- ``C``: the original store (what the long tail costs is A against C);
- ``A``: the lengthened store, tmax by today's rule;
- ``B-qNN``: the lengthened store truncated at its NN-th length percentile K: a dialogue with more
  than K agent turns keeps its first K-1 exchanges and its final exchange (the one the rating
  judges), so today's rule derives tmax from K. A transformation of the store, not of the estimator.

The lengthened store: a seeded share of the dialogues (``--share``) get neutral exchanges inserted
before their final customer turn (the customer asks for a moment, the agent says to take their
time), their number drawn from a lognormal law (median ``--extra-median``, ``--extra-sigma``),
capped at ``--max-agent-turns`` agent turns in all. Ratings are left as they are: the outcome
did not change. Each variant's store, the dev agents' target replies at its states (sampled by the
product's sampler through the benchmark's agent spec; the original's copied from the product's
data), its results and the caches live under ``--work``, outside the repository; a rerun reuses
the results whose inputs are unchanged.

    .venv/bin/python studies/long_tail_tmax.py --work /work/tail-data --quantile 0.9 --quantile 0.75

Output: studies/results/long_tail_tmax.{md,json}.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import multiprocessing
import resource
import shlex
import shutil
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from result_files import paired_cell, write_result

REPO = Path(__file__).resolve().parents[1]
BENCHMARK = "airline"

# The inserted exchanges: a customer asking for a moment, an agent waiting. The sellers log no
# politeness that is not tied to a slot (a question, a proposal), so the texts are fixed.
USER_CHATTER = ("Sorry, one moment please.", "Hold on, let me check something.", "Just a second, sorry.",
                "One moment, I am looking for my notes.")
AGENT_CHATTER = ("No problem, take your time.", "Of course, I will wait.", "Sure, no rush.",
                 "Take your time, I am here.")


# ---- the stores ------------------------------------------------------------------------------

def _dialogue_turns(turns) -> dict[str, list[tuple[str, str]]]:
    """(role, text) per dialogue, in turn order."""
    t = turns.sort_by([("dialog_id", "ascending"), ("turn_index", "ascending")])
    out: dict[str, list[tuple[str, str]]] = {}
    for d, role, text in zip(t.column("dialog_id").to_pylist(), t.column("role").to_pylist(), t.column("text").to_pylist()):
        out.setdefault(d, []).append((role, text))
    return out


def _with_turns(store, turns_of: dict[str, list[tuple[str, str]]]):
    """``store`` with every dialogue's turns replaced by ``turns_of``'s (``n_turns`` to match)."""
    import pyarrow as pa

    from enigma.store import schema as S
    from enigma.store.experience import ExperienceStore

    ids = store.dialogues.column("dialog_id").to_pylist()
    rows = [(d, i, role, text) for d in ids for i, (role, text) in enumerate(turns_of[d])]
    turns = pa.table({"dialog_id": [r[0] for r in rows], "turn_index": [r[1] for r in rows],
                      "role": [r[2] for r in rows], "text": [r[3] for r in rows]}, schema=S.TURNS_SCHEMA)
    n_turns = pa.array([len(turns_of[d]) for d in ids], pa.int32())
    dialogues = store.dialogues.set_column(store.dialogues.schema.get_field_index("n_turns"), "n_turns", n_turns)
    return ExperienceStore(dialogues, turns, store.rejects)


def agent_turns(store) -> list[int]:
    """Agent turns per dialogue, in the dialogues table's order."""
    per = _dialogue_turns(store.turns)
    return [sum(r == "agent" for r, _ in per[d]) for d in store.dialogues.column("dialog_id").to_pylist()]


def lengthen(store, share: float, extra_median: float, extra_sigma: float, max_agent_turns: int, seed: int):
    """A copy of ``store`` in which a seeded ``share`` of the dialogues get neutral exchanges
    inserted before their final customer turn; returns it and {dialog_id: exchanges inserted}."""
    import numpy as np

    rng = np.random.default_rng(seed)
    per = _dialogue_turns(store.turns)
    ids = store.dialogues.column("dialog_id").to_pylist()
    chosen = sorted(rng.choice(len(ids), size=round(share * len(ids)), replace=False).tolist())
    draws = rng.lognormal(math.log(extra_median), extra_sigma, size=len(chosen))
    inserted = {}
    for i, x in zip(chosen, draws):
        d = ids[i]
        turns = per[d]
        users = [k for k, (r, _) in enumerate(turns) if r == "user"]
        n_agent = sum(r == "agent" for r, _ in turns)
        n = int(min(max(round(x), 1), max_agent_turns - n_agent))
        if not users or n < 1:
            continue
        at = users[-1]
        filler = [(role, text) for _ in range(n)
                  for role, text in (("user", USER_CHATTER[rng.integers(len(USER_CHATTER))]),
                                     ("agent", AGENT_CHATTER[rng.integers(len(AGENT_CHATTER))]))]
        per[d] = turns[:at] + filler + turns[at:]
        inserted[d] = n
    return _with_turns(store, per), inserted


def truncate(store, k: int):
    """A copy of ``store`` in which a dialogue with more than ``k`` agent turns keeps its first
    k-1 exchanges (every turn up to its (k-1)-th agent turn) and its final exchange (every turn
    after its last-but-one agent turn): k agent turns, the final action and the rating kept."""
    per = _dialogue_turns(store.turns)
    cut = 0
    for d, turns in per.items():
        at = [i for i, (r, _) in enumerate(turns) if r == "agent"]
        if len(at) > k:
            per[d] = turns[: at[k - 2] + 1] + turns[at[-2] + 1:]
            cut += 1
    return _with_turns(store, per), cut


def length_stats(store) -> dict[str, Any]:
    import numpy as np

    from enigma.ope.config import derived_tmax

    n = np.asarray(agent_turns(store))
    return {"dialogues": int(len(n)), "median": float(np.median(n)), "p75": float(np.quantile(n, 0.75)),
            "p90": float(np.quantile(n, 0.9)), "p95": float(np.quantile(n, 0.95)), "max": int(n.max()),
            "mean": float(n.mean()), "agent_turns": int(n.sum()), "tmax": derived_tmax(int(n.max())),
            "over_p90_of_original": int((n > 6).sum())}


# ---- params, sampling, estimates ---------------------------------------------------------------

def variant_params(work: Path, variant: str, dice: dict[str, Any] | None = None) -> dict[str, Any]:
    """params.yaml with the variant's data folder, the caches under ``work`` and ENIGMA without
    its interval (and with ``dice``'s settings over its own); the benchmark without rollouts
    (ENIGMA reads none)."""
    from bench_params import with_dice
    from enigma.params import load_yaml

    data = with_dice(load_yaml(REPO / "params.yaml"), {"interval_resamples": 0, **(dice or {})})
    data = copy.deepcopy(data)
    data["shared"]["embedding_cache"] = str(work / "cache" / "embeddings")
    data.setdefault("sample", {})["cache_dir"] = str(work / "cache" / "samples")
    data["encode"]["weights_cache_dir"] = str(work / "cache" / "weights")
    data["pipeline"]["data_dir"] = str(work / variant)
    data["benchmarks"][BENCHMARK]["rollouts"] = None
    return data


def _estimate_variant(params_data: dict[str, Any], agents: list[str]) -> list[dict[str, Any]]:
    """In its own process (one torch thread): every agent of ``agents`` held out in turn, as the
    train stage runs one (evaluate_one, a failure written as the agent's result); per agent its
    seconds, whether the result was reused and the process's peak resident memory so far."""
    from enigma.estimators import benchmark_estimator
    from enigma.evaluation.loao import evaluate_one
    from enigma.evaluation.results import record_failure
    from enigma.params import Params
    from enigma.pipeline.sample import read_targets
    from enigma.pipeline.train import sources
    from enigma.store.experience import ExperienceStore

    params = Params.from_dict(params_data)
    b = params.benchmark(BENCHMARK)
    store = ExperienceStore.open(b.store)
    est = benchmark_estimator(b, "enigma", params)
    out = []
    for a in agents:
        t0 = time.perf_counter()
        error, resumed = None, False
        try:
            _, resumed = evaluate_one(store, est, a, sources(b, read_targets(b, a), None), b.results_dir())
        except Exception as exc:  # a diverged run is the agent's result, as in the train stage
            record_failure(b.results_dir(), est, a, store.rating_names, exc)
            error = f"{type(exc).__name__}: {str(exc)[:300]}"
        rec = {"agent": a, "seconds": time.perf_counter() - t0, "resumed": bool(resumed), "error": error,
               "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
        print(f"{b.data_dir}: {a}: {rec['seconds']:.1f}s{' (reused)' if resumed else ''}"
              f"{' FAILED ' + error if error else ''}, peak {rec['peak_rss_mib']:.0f} MiB", flush=True)
        out.append(rec)
    return out


def prepare(work: Path, args) -> tuple[dict[str, Any], dict[str, Any]]:
    """Every variant's store and truth under ``work``; returns their length statistics and how
    each was made."""
    from enigma.store.experience import ExperienceStore

    import numpy as np

    original = ExperienceStore.open(args.source / "store")
    stores = {"C": original}
    made = {"C": "the airline store as the product built it"}
    long, inserted = lengthen(original, args.share, args.extra_median, args.extra_sigma, args.max_agent_turns, args.seed)
    stores["A"] = long
    made["A"] = (f"{len(inserted)} dialogues ({args.share:.0%}, seed {args.seed}) with {sum(inserted.values())} neutral "
                 f"exchanges inserted before the final customer turn (lognormal, median {args.extra_median}, sigma "
                 f"{args.extra_sigma}; at most {args.max_agent_turns} agent turns in all)")
    n = np.asarray(agent_turns(long))
    for q in args.quantile:
        k = int(np.quantile(n, q, method="higher"))
        cut, n_cut = truncate(long, k)
        name = f"B-q{round(q * 100)}"
        stores[name] = cut
        made[name] = f"A truncated at its {q:.0%} length quantile K = {k} agent turns ({n_cut} dialogues cut)"
    stats = {}
    for v, s in stores.items():
        d = work / v / BENCHMARK
        if not (d / "store" / "dialogues.parquet").is_file() or v != "C" and _store_changed(d / "store", s):
            s.write(d / "store", {"study": "long_tail_tmax", "variant": v, "made": made[v]})
        shutil.copyfile(args.source / "truth.parquet", d / "truth.parquet")
        stats[v] = length_stats(s)
    return stats, made


def _store_changed(path: Path, store) -> bool:
    """Whether the store written at ``path`` differs from ``store`` (a rerun with other settings)."""
    from enigma.store.experience import ExperienceStore

    old = ExperienceStore.open(path)
    return not (old.turns.equals(store.turns) and old.dialogues.equals(store.dialogues))


def sample_targets(work: Path, source: Path, variant: str, agents: list[str]) -> None:
    """The dev agents' replies at every state of the variant's store (the original's: the
    product's own target tables, copied)."""
    from enigma.params import Params
    from enigma.pipeline.sample import sample_agent, targets_path

    params = Params.from_dict(variant_params(work, variant))
    b = params.benchmark(BENCHMARK)
    for a in agents:
        out = targets_path(b, a)
        if variant == "C":
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source / "targets" / f"{a}.parquet", out)
            continue
        t0 = time.perf_counter()
        table = sample_agent(b, params, a)  # the sample cache makes a rerun (and the states A and B share) cheap
        print(f"{variant}: targets of {a}: {table.num_rows} replies in {time.perf_counter() - t0:.1f}s", flush=True)


# ---- the report ------------------------------------------------------------------------------

def chatter_replies(work: Path, variant: str, agents: list[str]) -> dict[str, Any] | None:
    """What the dev agents reply where the log has an inserted waiting reply: how many such
    (state, agent) replies, and the share that is a final action (an action tag) rather than
    more waiting, i.e. how far off the logs' support the targets are in the inserted stretch."""
    import pyarrow.parquet as pq

    from enigma.sim.language import read_action
    from enigma.store.experience import ExperienceStore

    d = work / variant / BENCHMARK
    turns = ExperienceStore.open(d / "store").turns.to_pandas()
    waiting = turns[(turns.role == "agent") & turns.text.isin(AGENT_CHATTER)][["dialog_id", "turn_index"]]
    if waiting.empty:
        return None
    n = acted = 0
    for a in agents:
        t = pq.read_table(d / "targets" / f"{a}.parquet", columns=["dialog_id", "turn_index", "text"]).to_pandas()
        t = t.merge(waiting, on=["dialog_id", "turn_index"])
        n += len(t)
        acted += int(sum(read_action(x) is not None for x in t.text if isinstance(x, str)))
    return {"replies": n, "final_action_share": acted / n if n else None}


def score(work: Path, source: Path, variant: str, agents: list[str]):
    """ENIGMA's estimates of the dev agents in a variant, scored against the truth."""
    from enigma.evaluation.correlation import score_estimator
    from enigma.evaluation.results import read_results
    from enigma.evaluation.truth import read_truth, truth_wide

    part = read_results(work / variant / BENCHMARK / "results")
    part = part[(part.estimator == "enigma") & part.agent_id.isin(agents)]
    estimates = part.pivot(index="agent_id", columns="rating", values="estimate")
    truth = truth_wide(read_truth(source / "truth.parquet")).loc[agents]
    ratings = sorted(truth.columns)
    diag = [json.loads(d).get("all", {}) for d in part.drop_duplicates("agent_id").diagnostics if isinstance(d, str)]
    return score_estimator(variant, estimates, truth, ratings), estimates, part, diag


def _kept_runs(path: Path, fresh: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The per-agent records of a variant's runs (``path``), with ``fresh`` put in: a result
    reused by a rerun keeps the record of the run that computed it (its seconds, its memory)."""
    old = {r["agent"]: r for r in json.loads(path.read_text())} if path.is_file() else {}
    for r in fresh:
        if not (r["resumed"] and r["agent"] in old):
            old[r["agent"]] = r
    if fresh:
        path.write_text(json.dumps(list(old.values()), indent=1) + "\n")
    return list(old.values())


def _verdict(d: dict[str, Any] | None, worse: str, better: str) -> str:
    """A paired difference in words: whether its 95% interval holds zero."""
    if not d:
        return "not paired (other agents scored)"
    lo, hi = d["ci95"]
    if lo <= 0 <= hi:
        return f"{paired_cell(d)}: the interval holds zero, no difference measurable on these agents"
    return f"{paired_cell(d)}: {worse if hi < 0 else better}"


def reading(info: dict[str, Any], diffs: dict[str, Any]) -> list[str]:
    """The plain reading of the tables, worded from the numbers so that a rerun keeps it true,
    and what a product change would need (which no number here changes)."""
    lines = ["", "## Reading", ""]
    if "A - C" in diffs:
        lines.append("- Does the long tail hurt ENIGMA here? A minus C, mean Pearson "
                     + _verdict(diffs["A - C"]["pearson"], "the tail costs ENIGMA", "the tail helps ENIGMA")
                     + (f" (on {info['A']['agents']} agents a difference inside "
                        f"{paired_cell(diffs['A - C']['pearson']).split(' ', 1)[1]} is not excluded)" if diffs["A - C"]["pearson"] else "")
                     + f". Spread ratio (mean over ratings) C {info['C']['mean_spread_ratio']:.2f}, "
                     f"A {info['A']['mean_spread_ratio']:.2f}: "
                     + ("no collapse." if info["A"]["mean_spread_ratio"] >= 0.5 else "the estimates shrink towards a constant."))
    for name, d in diffs.items():
        if name.startswith("B-") and name.endswith("- A"):
            v = name.split(" ")[0]
            lines.append(f"- Does truncating at a quantile recover it? {v} minus A, mean Pearson "
                         + _verdict(d["pearson"], "the truncation costs more than the tail", "the truncation gains")
                         + f"; {v} minus C " + _verdict(diffs.get(f"{v} - C", {}).get("pearson"), "below the original", "above the original") + ".")
    cost = ", ".join(f"{v} {x['seconds_per_agent']:.1f}" for v, x in info.items())
    lines.append(f"- Cost, seconds per held-out agent: {cost} (one torch thread, on 2 cores shared with other work: "
                 "differences of a few seconds are noise); the slots past the longest dialogue are one pad row each, "
                 "so a longer tmax costs by the agent turns the store holds, not by tmax times the dialogues "
                 "(`enigma.ope.flow_rows`).")
    lines += ["", "What this does not show, and what a product change would need:", "",
              "- The built tail is neutral chatter, the same few texts for every agent, inserted before the final "
              "customer turn of a seeded share of the dialogues, with the ratings kept; a real long tail (the issue's "
              "hidden set: median 9, p90 27) has long dialogues that differ in content and whose length goes with "
              "the outcome. A tail that costs nothing here may still cost there; the hidden set is never used for a choice.",
              "- B is a transformation of the store (the middle exchanges of a long dialogue dropped), not the "
              "issue's pooling of the longer tails into shared slots. In the product that would be a `dice.tmax` rule "
              "from a length quantile with the dialogues longer than it pooled in the last slots inside the estimator "
              "(today a dialogue longer than tmax - 1 is an error: `enigma.ope.padding.check_tmax`), a test that the "
              "pooled chain's slot masses still sum to one, and a paired measurement on a store with a real long "
              "tail, on both halves of its agents, before any default changes.",
              "- Nothing here is adopted: params.yaml, the estimator and `derived_tmax` are unchanged."]
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, required=True, help="a folder outside the repository: stores, targets, results, caches")
    ap.add_argument("--source", type=Path, default=REPO / "data" / BENCHMARK,
                    help="the airline benchmark's data folder, made by the pipeline (store, truth.parquet, targets)")
    ap.add_argument("--share", type=float, default=0.15, help="share of the dialogues lengthened")
    ap.add_argument("--extra-median", type=float, default=14.0, help="median exchanges inserted in a lengthened dialogue")
    ap.add_argument("--extra-sigma", type=float, default=0.8, help="sigma of the lognormal law of the exchanges inserted")
    ap.add_argument("--max-agent-turns", type=int, default=150, help="at most this many agent turns in a lengthened dialogue")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quantile", type=float, action="append", default=None, help="B's length quantiles (default 0.9)")
    ap.add_argument("--variants", default=None, help="comma-separated variants to estimate (default: all); the others are only reported if their results exist")
    ap.add_argument("--tag", default="long_tail_tmax")
    args = ap.parse_args()
    args.quantile = args.quantile or [0.9]
    if REPO in args.work.resolve().parents or args.work.resolve() == REPO:
        sys.exit("--work: a folder outside the repository")

    from enigma.evaluation.correlation import paired_difference
    from enigma.params import Params
    from enigma.pipeline.train import warm_embeddings
    from enigma.pipeline.workers import init_worker
    from enigma.store.experience import ExperienceStore
    from enigma.evaluation.split import split_agents
    from provenance import code_version

    import torch

    torch.set_num_threads(1)
    base = Params.load(REPO / "params.yaml")
    dev = split_agents(ExperienceStore.open(args.source / "store").agents(), base.report.split, BENCHMARK)["dev"]
    stats, made = prepare(args.work, args)
    variants = list(stats)
    run = variants if args.variants is None else [v for v in args.variants.split(",") if v]
    runs: dict[str, list[dict[str, Any]]] = {}
    for v in run:
        sample_targets(args.work, args.source, v, dev)
        params_data = variant_params(args.work, v)
        warm_embeddings(Params.from_dict(params_data).benchmark(BENCHMARK), Params.from_dict(params_data))
        # one process per variant, one after the other: its peak memory is the variant's alone
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"), initializer=init_worker) as pool:
            fresh = pool.submit(_estimate_variant, params_data, dev).result()
        runs[v] = _kept_runs(args.work / v / "runs.json", fresh)

    info, scores = {}, {}
    for v in variants:
        if not (args.work / v / BENCHMARK / "results").is_dir():
            continue
        s, estimates, part, diag = score(args.work, args.source, v, dev)
        scores[v] = s
        ran = runs.get(v) or _kept_runs(args.work / v / "runs.json", [])
        info[v] = {
            "store": made[v], "lengths": stats[v],
            "mean_pearson": s.means["pearson"], "mean_pearson_ci95": s.mean_ci["pearson"], "mean_spearman": s.means["spearman"],
            "pearson_per_rating": {r: s.per_rating[r]["pearson"] for r in s.ratings},
            "spread_ratio_per_rating": {r: s.per_rating[r]["spread_ratio"] for r in s.ratings},
            "mean_spread_ratio": float(sum(s.per_rating[r]["spread_ratio"] for r in s.ratings) / len(s.ratings)),
            "flags": s.flags, "converged": sum(bool(d.get("converged")) for d in diag), "agents": len(s.agents),
            "failed_agents": int(part.loc[part.error.notna(), "agent_id"].nunique()),
            # as each result recorded it when computed (a reused result keeps its own cost)
            "seconds_per_agent": float(part.drop_duplicates("agent_id").seconds.mean()),
            "seconds": {a: float(x) for a, x in part.drop_duplicates("agent_id").set_index("agent_id").seconds.items()},
            "peak_rss_mib": max((r["peak_rss_mib"] for r in ran if not r["resumed"]), default=None),
            "estimates": {a: {r: float(estimates.loc[a, r]) for r in s.ratings} for a in s.agents},
            "chatter_replies": chatter_replies(args.work, v, dev),
        }
    pairs = [("A", "C")] + [(v, "A") for v in info if v.startswith("B-")] + [(v, "C") for v in info if v.startswith("B-")]
    diffs = {f"{a} - {b}": {st: paired_difference(scores[a], scores[b], st, 0.95) for st in ("pearson", "spearman")}
             for a, b in pairs if a in scores and b in scores}

    cmd = shlex.join([".venv/bin/python", "studies/long_tail_tmax.py", *sys.argv[1:]])
    code = code_version()
    first = next(iter(info.values()))
    ratings = list(first["pearson_per_rating"])
    lines = ["# Long-tailed dialogue lengths and dice.tmax (issue 58): a study on a lengthened airline store", "",
             f"`{cmd}` (code: {code})", "",
             "**A study on dev data built for it; nothing is adopted.** ENIGMA as params.yaml runs it with "
             "`interval_resamples: 0`, leave-one-agent-out, scored on the "
             f"{len(dev)} dev-half agents of airline (`report.split`) against the airline truth "
             "(the inserted exchanges change no outcome, so the truth stands); 1000 bootstrap resamples of the agents, "
             "the same for every variant, so differences are paired.", "",
             "## The stores", "",
             "| variant | how it was made | dialogues | agent turns | median | p75 | p90 | p95 | longest | tmax (today's rule) | dialogues over 6 |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for v in variants:
        st = stats[v]
        lines.append(f"| {v} | {made[v]} | {st['dialogues']} | {st['agent_turns']} | {st['median']:g} | {st['p75']:g} | "
                     f"{st['p90']:g} | {st['p95']:g} | {st['max']} | {st['tmax']} | {st['over_p90_of_original']} |")
    shares = [f"{v} {x['chatter_replies']['final_action_share']:.0%} of {x['chatter_replies']['replies']}"
              for v, x in info.items() if x["chatter_replies"]]
    if shares:
        lines += ["", "Where the log has an inserted waiting reply, the dev agents' own replies are a final action in "
                      + ", ".join(shares) + " (a seller rebuilds its state from the history text and acts once it knows "
                      "enough, or by its eighth turn): the targets leave the logs' support in the inserted stretch."]
    lines += ["", "## ENIGMA per variant", "",
              "| variant | mean Pearson [95% CI] | mean Spearman | " + " | ".join(f"{r} Pearson" for r in ratings)
              + " | mean spread ratio | " + " | ".join(f"{r} spread" for r in ratings) + " | converged | s/agent | peak RSS MiB |",
              "|---|---|---|" + "---|" * len(ratings) + "---|" + "---|" * len(ratings) + "---|---|---|"]
    fmt = lambda x, spec=".3f": "n/a" if x is None or x != x else format(x, spec)  # noqa: E731
    for v, x in info.items():
        ci = x["mean_pearson_ci95"] or (None, None)
        conv = f"{x['converged']}/{x['agents']}" + (f" ({x['failed_agents']} failed)" if x["failed_agents"] else "")
        lines.append(f"| {v} | {fmt(x['mean_pearson'])} [{fmt(ci[0])}, {fmt(ci[1])}] | {fmt(x['mean_spearman'])} | "
                     + " | ".join(fmt(x["pearson_per_rating"][r]) for r in ratings)
                     + f" | {fmt(x['mean_spread_ratio'], '.2f')} | " + " | ".join(fmt(x["spread_ratio_per_rating"][r], ".2f") for r in ratings)
                     + f" | {conv} | {fmt(x['seconds_per_agent'], '.1f')} | {fmt(x['peak_rss_mib'], '.0f')} |")
    lines += ["", "Paired differences (mean over ratings, bootstrap over agents, 95%):", ""]
    for name, d in diffs.items():
        lines.append(f"- {name}: Pearson {paired_cell(d['pearson'])}, Spearman {paired_cell(d['spearman'])}")
    lines += reading(info, diffs)
    flagged = [f"- {v}: {f}" for v, x in info.items() for f in x["flags"]]
    if flagged:
        lines += ["", "Flags of the scoring (as the reports raise them):", ""] + flagged
    write_result(args.tag, lines, {"reproduce": cmd, "code": code, "dev_agents": dev, "variants": info, "paired": diffs,
                                   "runs": {v: r for v, r in runs.items()}})


if __name__ == "__main__":
    main()
