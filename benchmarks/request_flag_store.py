"""How well the request check of a knowledge base (``Lookup.answers`` against ``request``) marks a
wrong final status in a rated airline store: a check of the feature against the store's status
ratings, which ENIGMA itself never reads (docs/estimator.md, "What the customer asked for").

Each logged dialogue's final action (its first action tag), when it is of kind book, change or
cancel, is flagged as the encoder flags it: against the latest request that the customer's turns
before it state. Counted per flag and
status rating, overall and per logging agent.

    .venv/bin/python benchmarks/request_flag_store.py data/airline/store --tag request_flag_airline

Output: benchmarks/results/<tag>.{md,json}.
"""

from __future__ import annotations

import argparse
import collections
import json
import shlex
import sys
from pathlib import Path

import duckdb

from enigma.encoders.knowledge import load_knowledge, reads_requests, unrequested
from provenance import code_version

RESULTS = Path(__file__).resolve().parent / "results"
KINDS = ("book", "change", "cancel")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("store", type=Path, help="a store folder (dialogues.parquet, turns.parquet) with a status rating")
    ap.add_argument("--knowledge", default="python:enigma.sim.knowledge:airline_requests")
    ap.add_argument("--tag", required=True)
    args = ap.parse_args()
    base = load_knowledge(args.knowledge, "--knowledge")
    if not reads_requests(base):
        sys.exit(f"--knowledge {args.knowledge!r} reads no requests (it has no request(user_text))")
    con = duckdb.connect()
    turns = con.execute(f"select dialog_id, role, text from '{args.store / 'turns.parquet'}' order by dialog_id, turn_index").fetchall()
    rated = {d: (agent, status) for d, agent, status in
             con.execute(f"select dialog_id, agent_id, rating_status from '{args.store / 'dialogues.parquet'}'").fetchall()}
    by_dialogue = collections.defaultdict(list)
    for d, role, text in turns:
        by_dialogue[d].append((role, text))
    counts: collections.Counter = collections.Counter()
    per_agent: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for d, dialogue in by_dialogue.items():
        asked = None
        for role, text in dialogue:
            if role == "user":
                asked = base.request(text) or asked
                continue
            look = base.lookup(text)
            if not look.answers:
                continue
            if set(look.answers) <= set(KINDS) and len(look.answers) == 1:
                key = ("flagged" if unrequested(look, asked) else "not flagged", "status right" if rated[d][1] == 1.0 else "status wrong")
                counts[key] += 1
                per_agent[rated[d][0]][key] += 1
            break  # the dialogue's first final action only
    rows = [(f, s, counts[(f, s)]) for f in ("flagged", "not flagged") for s in ("status right", "status wrong")]
    command = shlex.join([".venv/bin/python", "benchmarks/request_flag_store.py", *sys.argv[1:]])
    md = [f"# The request check against a store's status ratings ({args.store})", "", f"`{command}` (code: {code_version()})", "",
          f"Final actions of kind {', '.join(KINDS)}, one per dialogue, flagged by `{args.knowledge}`:", "",
          "| flag | status right | status wrong |", "|---|---|---|"]
    for f in ("flagged", "not flagged"):
        md.append(f"| {f} | {counts[(f, 'status right')]} | {counts[(f, 'status wrong')]} |")
    md += ["", "Per logging agent:", "",
           "| agent | flagged, wrong | flagged, right | not flagged, wrong | not flagged, right |", "|---|---|---|---|---|"]
    for agent, c in sorted(per_agent.items()):
        md.append(f"| {agent} | {c[('flagged', 'status wrong')]} | {c[('flagged', 'status right')]} | "
                  f"{c[('not flagged', 'status wrong')]} | {c[('not flagged', 'status right')]} |")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{args.tag}.md").write_text("\n".join(md) + "\n")
    (RESULTS / f"{args.tag}.json").write_text(json.dumps({
        "reproduce": command, "code": code_version(),
        "counts": [{"flag": f, "status": s, "n": n} for f, s, n in rows],
        "per_agent": {a: {f"{f}, {s}": c[(f, s)] for f, s, _ in rows} for a, c in sorted(per_agent.items())},
    }, indent=1) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
