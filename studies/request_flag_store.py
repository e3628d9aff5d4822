"""How well the request check of a knowledge base (``Lookup.answers`` against ``request``) marks a
wrong final status in a rated airline store: a check of the feature against the store's status
ratings, which ENIGMA itself never reads (docs/estimator.md, "What the customer asked for").

Each logged dialogue's final action (its first action tag), when it is of kind book, change or
cancel, is flagged as the encoder flags it: against the latest request that the customer's turns
before it state. Counted per flag and
status rating, overall and per logging agent.

    .venv/bin/python studies/request_flag_store.py data/airline/store --tag request_flag_airline

Output: studies/results/<tag>.{md,json}.
"""

from __future__ import annotations

import argparse
import collections
import json
import shlex
import sys
from pathlib import Path

from enigma.encoders.knowledge import latest_request, load_knowledge, reads_requests, unrequested
from enigma.store.experience import ExperienceStore
from provenance import code_version

RESULTS = Path(__file__).resolve().parent / "results"
KINDS = ("book", "change", "cancel")


def _first_action(base, dialogue):
    """The index and lookup of the dialogue's first agent turn that takes an action, or None."""
    for at, turn in enumerate(dialogue):
        if turn.role == "agent" and (look := base.lookup(turn.text)).answers:
            return at, look
    return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("store", type=Path, help="a store folder (dialogues.parquet, turns.parquet) with a status rating")
    ap.add_argument("--knowledge", default="python:enigma.sim.knowledge:airline_requests")
    ap.add_argument("--tag", required=True)
    args = ap.parse_args()
    base = load_knowledge(args.knowledge, "--knowledge")
    if not reads_requests(base):
        sys.exit(f"--knowledge {args.knowledge!r} reads no requests (it has no request(user_text))")
    store = ExperienceStore.open(args.store)
    agents = store.dialogues.column("agent_id").to_pylist()
    status = dict(zip(store.dialogues.column("dialog_id").to_pylist(), store.dialogues.column("rating_status").to_pylist()))
    counts: collections.Counter = collections.Counter()
    per_agent: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for (d, dialogue), agent in zip(store.histories().items(), agents):
        acted = _first_action(base, dialogue)
        if acted is None or len(acted[1].answers) != 1:  # "no flights"/"no reservation" answer two kinds
            continue
        at, look = acted
        key = ("flagged" if unrequested(look, latest_request(base, dialogue[:at])) else "not flagged",
               "status right" if status[d] == 1.0 else "status wrong")
        counts[key] += 1
        per_agent[agent][key] += 1
    rows = [(f, s, counts[(f, s)]) for f in ("flagged", "not flagged") for s in ("status right", "status wrong")]
    command = shlex.join([".venv/bin/python", "studies/request_flag_store.py", *sys.argv[1:]])
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
