"""Delayed outcomes (issue 58, direction 1): does ENIGMA keep its signal when the rating comes
several exchanges after the turn that decided it? A study on dev data built for it, never a
product change.

In the airline store the rating follows the seller's final action at once (book, cancel, no
flight): the decisive reply is the last agent turn. Long real chats are not like that: what makes
a conversation good happens along it, and the rating comes at its end, after turns that decide
nothing. The fitted Q of ENIGMA's doubly robust value learns a reply's worth only through the
Bellman targets of the turns after it (``enigma.ope.fqe``), and the state it reads is the last
exchange, the previous agent reply and a mean of the earlier turns (``enigma.encoders.frozen``).
This script measures how far that carries.

Stores (every one under ``--work``, outside the repository):

- ``C``: the airline store as the product built it;
- ``D<k>``: the same store with ``k`` neutral closing exchanges appended to EVERY dialogue after
  its last agent turn (the customer thanks, the seller says goodbye); the ratings are left as
  they are (nothing after the final action changes the outcome).

Targets: each dev agent's replies at the original states are the product's (copied from
``data/airline/targets``); at an appended state the agent is given the log's own closing reply,
so every agent closes alike and nothing but the original decisive turns separates the agents.
What is measured is the estimator, not how a seller would answer a thank-you.

Each row is ENIGMA as params.yaml runs it without its interval (``interval_resamples: 0``), with
``--row NAME='{"dice": "overrides"}'`` adding rows; every (store, row) is estimated
leave-one-agent-out on the dev-half agents of airline (``report.split``) and scored against the
airline truth, paired (1000 bootstrap resamples of the agents, the same for every variant).

    .venv/bin/python studies/delayed_outcome.py --work /work/delay --k 1 --k 3 --k 8

``fqe.history`` (the Q also reads the mean of the dialogue's earlier logged pairs) was a study
setting when the committed results were made, and the default was ``history: false``; it is the
product's default since (so the results' "default" row is today's ``fqe.history: false``). Rows
that set ``fqe.td_lambda`` (lambda-returns, not adopted) need ``studies/patches/fqe_td_lambda.patch``
applied, e.g. in a worktree run with ``PYTHONPATH=<worktree>/src``.

Output: studies/results/delayed_outcome.{md,json}.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import shlex
import shutil
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from long_tail_tmax import BENCHMARK, _dialogue_turns, _estimate_variant, _with_turns, length_stats, variant_params
from result_files import paired_cell, write_result

REPO = Path(__file__).resolve().parents[1]

# Closing exchanges: the seller logs no small talk, so the texts are fixed and say nothing of the
# outcome (the same few for every dialogue, drawn with the seed).
USER_CLOSING = ("Thank you.", "Okay, thanks.", "Alright, thank you for your help.", "Thanks, that is all.")
AGENT_CLOSING = ("You're welcome.", "Glad I could help.", "Have a nice day.", "Goodbye, and thank you for calling.")


def append_closings(store, k: int, seed: int):
    """A copy of ``store`` with ``k`` closing exchanges after every dialogue's last turn (a
    dialogue that ends on a user turn gets the agent's closing reply first, so every one ends on
    an agent turn); returns it and {dialog_id: [(turn_index, agent text)] of the appended agent turns}."""
    import numpy as np

    rng = np.random.default_rng(seed)
    per = _dialogue_turns(store.turns)
    appended: dict[str, list[tuple[int, str]]] = {}
    for d, turns in per.items():
        extra = []
        for _ in range(k):
            extra += [("user", USER_CLOSING[rng.integers(len(USER_CLOSING))]),
                      ("agent", AGENT_CLOSING[rng.integers(len(AGENT_CLOSING))])]
        per[d] = turns + extra
        appended[d] = [(len(turns) + i, text) for i, (role, text) in enumerate(extra) if role == "agent"]
    return _with_turns(store, per), appended


def write_targets(source: Path, out: Path, agents: list[str], store, appended: dict[str, list[tuple[int, str]]] | None) -> None:
    """Each agent's target table for the variant's store: the product's rows at the original
    states, and at every appended agent turn the log's own closing reply (keyed as the sampler
    keys a state: dialog_id, turn_index and the history's ``state_hash``)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from enigma.agents import state_hash

    out.mkdir(parents=True, exist_ok=True)
    histories = store.histories() if appended else {}
    for a in agents:
        original = pq.read_table(source / "targets" / f"{a}.parquet")
        if not appended:
            pq.write_table(original, out / f"{a}.parquet")
            continue
        fp = original.column("agent_fingerprint")[0].as_py()
        rows = {name: [] for name in original.schema.names}
        for d, extra in appended.items():
            for t, text in extra:
                for name, value in (("dialog_id", d), ("turn_index", t), ("sample_index", 0), ("text", text),
                                    ("agent_fingerprint", fp), ("state_hash", state_hash(tuple(histories[d][:t]))),
                                    ("seed", 0), ("error", None)):
                    rows[name].append(value)
        added = pa.table({n: pa.array(rows[n], original.schema.field(n).type) for n in original.schema.names})
        pq.write_table(pa.concat_tables([original, added.replace_schema_metadata(original.schema.metadata)]),
                       out / f"{a}.parquet")


def link_inputs(work: Path, store_name: str, folder: str) -> None:
    """``work/folder/airline`` reads the store, truth and targets of ``work/stores/<store_name>``."""
    d = work / folder / BENCHMARK
    d.mkdir(parents=True, exist_ok=True)
    for part in ("store", "truth.parquet", "targets"):
        link = d / part
        if not link.exists():
            link.symlink_to(work / "stores" / store_name / part)


def score(work: Path, source: Path, folder: str, agents: list[str]):
    from enigma.evaluation.correlation import score_estimator
    from enigma.evaluation.results import read_results
    from enigma.evaluation.truth import read_truth, truth_wide

    part = read_results(work / folder / BENCHMARK / "results")
    part = part[(part.estimator == "enigma") & part.agent_id.isin(agents)]
    estimates = part.pivot(index="agent_id", columns="rating", values="estimate")
    truth = truth_wide(read_truth(source / "truth.parquet")).loc[agents]
    values = {}
    for _, r in part.iterrows():
        diag = json.loads(r.diagnostics) if isinstance(r.diagnostics, str) else r.diagnostics
        values.setdefault(r.agent_id, {})[r.rating] = diag.get("all", {}).get("values", {}).get(r.rating)
    return score_estimator(folder, estimates, truth, sorted(truth.columns)), estimates, part, values


def reading(info: dict[str, Any], diffs: dict[str, Any], stores: list[str], rows: list[str]) -> list[str]:
    """The tables in words, worded from the numbers so that a rerun keeps them true."""
    def said(d):
        if not d:
            return "not paired"
        lo, hi = d["ci95"]
        return paired_cell(d) + (" (the interval holds zero)" if lo <= 0 <= hi else " (the interval excludes zero)")

    out = ["", "## Reading", ""]
    for row in rows:
        for name in stores[1:]:
            x, c = info.get(f"{name}-{row}"), info.get(f"C-{row}")
            if x and c:
                out.append(f"- {row}, {name} against C: mean Pearson {said(diffs[f'{name}-{row} - C-{row}']['pearson'])}; "
                           f"spread ratio {c['mean_spread_ratio']:.2f} -> {x['mean_spread_ratio']:.2f}.")
    for row in rows[1:]:
        for name in stores:
            key = f"{name}-{row} - {name}-default"
            if key in diffs:
                out.append(f"- {row} against default on {name}: mean Pearson {said(diffs[key]['pearson'])}.")
    import numpy as np

    out += ["- Where the value's spread goes (sd over the dev agents of each value in the runs' diagnostics, the "
            "doubly robust `dr`, the fitted Q's own `q` and the ratio-weighted `weighted`):"]
    for folder, x in info.items():
        cells = []
        for rating in ("reward", "status"):
            for kind in ("dr", "q", "weighted"):
                vals = [v[rating][kind] for v in x["values"].values() if v.get(rating)]
                if vals:
                    cells.append(f"{rating} {kind} {float(np.std(vals)):.3f}")
        out.append(f"  - {folder}: " + ", ".join(cells))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, required=True, help="a folder outside the repository")
    ap.add_argument("--source", type=Path, default=REPO / "data" / BENCHMARK,
                    help="the airline benchmark's data folder (store, truth.parquet, targets), made by the pipeline")
    ap.add_argument("--cache", type=Path, default=REPO / "cache" / "embeddings",
                    help="an embedding cache to start from (copied into --work once)")
    ap.add_argument("--k", type=int, action="append", default=None, help="closing exchanges appended (default 1, 3, 8)")
    ap.add_argument("--row", action="append", default=[], help="NAME=JSON: a row's dice overrides")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--tag", default="delayed_outcome")
    args = ap.parse_args()
    ks = args.k or [1, 3, 8]
    if REPO in args.work.resolve().parents or args.work.resolve() == REPO:
        sys.exit("--work: a folder outside the repository")
    rows = {"default": {}}
    for spec in args.row:
        name, _, js = spec.partition("=")
        rows[name] = json.loads(js)

    import torch

    from enigma.evaluation.correlation import paired_difference
    from enigma.evaluation.split import split_agents
    from enigma.params import Params
    from enigma.pipeline.train import warm_embeddings
    from enigma.pipeline.workers import init_worker
    from enigma.store.experience import ExperienceStore
    from provenance import code_version

    torch.set_num_threads(1)
    base = Params.load(REPO / "params.yaml")
    original = ExperienceStore.open(args.source / "store")
    dev = split_agents(original.agents(), base.report.split, BENCHMARK)["dev"]
    if not (args.work / "cache" / "embeddings").is_dir() and args.cache.is_dir():
        shutil.copytree(args.cache, args.work / "cache" / "embeddings")

    stores, stats = {"C": (original, None)}, {}
    for k in ks:
        stores[f"D{k}"] = append_closings(original, k, args.seed)
    for name, (store, appended) in stores.items():
        d = args.work / "stores" / name
        if not (d / "store" / "dialogues.parquet").is_file():
            store.write(d / "store", {"study": "delayed_outcome", "variant": name})
            shutil.copyfile(args.source / "truth.parquet", d / "truth.parquet")
            write_targets(args.source, d / "targets", dev, store, appended)
        stats[name] = length_stats(store)

    runs = {}
    for row, dice in rows.items():
        for name in stores:
            folder = f"{name}-{row}"
            link_inputs(args.work, name, folder)
            data = variant_params(args.work, folder, dice)
            p = Params.from_dict(data)
            warm_embeddings(p.benchmark(BENCHMARK), p)
            halves = [dev[i :: args.workers] for i in range(args.workers)]
            ctx = multiprocessing.get_context("spawn")
            with ProcessPoolExecutor(args.workers, mp_context=ctx, initializer=init_worker) as pool:
                runs[folder] = [r for f in [pool.submit(_estimate_variant, data, h) for h in halves] for r in f.result()]

    info, scores = {}, {}
    for folder in runs:
        s, estimates, part, values = score(args.work, args.source, folder, dev)
        scores[folder] = s
        info[folder] = {
            "mean_pearson": s.means["pearson"], "mean_pearson_ci95": s.mean_ci["pearson"], "mean_spearman": s.means["spearman"],
            "pearson_per_rating": {r: s.per_rating[r]["pearson"] for r in s.ratings},
            "mean_spread_ratio": float(sum(s.per_rating[r]["spread_ratio"] for r in s.ratings) / len(s.ratings)),
            "failed_agents": int(part.loc[part.error.notna(), "agent_id"].nunique()),
            # as each result recorded it when computed (a reused result keeps its own cost)
            "seconds_per_agent": float(part.drop_duplicates("agent_id").seconds.mean()),
            "estimates": {a: {r: float(estimates.loc[a, r]) for r in s.ratings} for a in s.agents},
            "values": values,
        }
    pairs = [(f"{n}-{row}", f"C-{row}") for row in rows for n in stores if n != "C"]
    pairs += [(f"{n}-{row}", f"{n}-default") for row in rows if row != "default" for n in stores]
    diffs = {f"{a} - {b}": {st: paired_difference(scores[a], scores[b], st, 0.95) for st in ("pearson", "spearman")}
             for a, b in pairs if a in scores and b in scores}

    cmd = shlex.join([".venv/bin/python", "studies/delayed_outcome.py", *sys.argv[1:]])
    code = code_version()
    ratings = list(next(iter(info.values()))["pearson_per_rating"])
    fmt = lambda x, spec=".3f": "n/a" if x is None or x != x else format(x, spec)  # noqa: E731
    lines = ["# Delayed outcomes: the rating k exchanges after the decisive turn (issue 58)", "",
             f"`{cmd}` (code: {code})", "",
             "**A study on dev data built for it; nothing is adopted.** Every dialogue of the airline store gets k "
             "closing exchanges after its last agent turn (the customer thanks, the seller says goodbye), the ratings "
             "unchanged; at an appended state every agent is given the log's own closing reply. ENIGMA without its "
             f"interval, leave-one-agent-out, scored on the {len(dev)} dev-half agents of airline (`report.split`); "
             "1000 bootstrap resamples of the agents, the same for every variant, so differences are paired.", "",
             "`fqe.history` was a study setting when these results were made (the default row: `history: false`; "
             "it is the product's default since). Rows that set `fqe.td_lambda` need `git apply "
             "studies/patches/fqe_td_lambda.patch` (not adopted); with it at 0 the patched code gives the "
             "default's estimates bit for bit (C-default and D3-default, computed before and after the patch: max "
             "difference 0).", "",
             "| store | dialogues | agent turns | median | longest | tmax |", "|---|---|---|---|---|---|"]
    for name, st in stats.items():
        lines.append(f"| {name} | {st['dialogues']} | {st['agent_turns']} | {st['median']:g} | {st['max']} | {st['tmax']} |")
    lines += ["", "| store-row | mean Pearson [95% CI] | mean Spearman | " + " | ".join(ratings)
              + " | mean spread ratio | s/agent | failed |", "|---|---|---|" + "---|" * len(ratings) + "---|---|---|"]
    for folder, x in info.items():
        ci = x["mean_pearson_ci95"] or (None, None)
        lines.append(f"| {folder} | {fmt(x['mean_pearson'])} [{fmt(ci[0])}, {fmt(ci[1])}] | {fmt(x['mean_spearman'])} | "
                     + " | ".join(fmt(x["pearson_per_rating"][r]) for r in ratings)
                     + f" | {fmt(x['mean_spread_ratio'], '.2f')} | {fmt(x['seconds_per_agent'], '.1f')} | {x['failed_agents']} |")
    lines += ["", "Paired differences (mean over ratings, bootstrap over agents, 95%):", ""]
    for name, d in diffs.items():
        lines.append(f"- {name}: Pearson {paired_cell(d['pearson'])}, Spearman {paired_cell(d['spearman'])}")
    lines += reading(info, diffs, list(stores), list(rows))
    write_result(args.tag, lines, {"reproduce": cmd, "code": code, "dev_agents": dev, "rows": rows, "stores": stats,
                                   "results": info, "paired": diffs})


if __name__ == "__main__":
    main()
